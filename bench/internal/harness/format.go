package harness

import "time"

// The report's formats and the machine facts, for the other reports of
// this module (the gateway benchmark's) to write theirs alike.

// Rate formats a count or rate with thousands separators (1,234).
func Rate(v float64) string { return rate(v) }

// Dur formats a latency: µs below 1 ms, ms below 1 s, else s.
func Dur(d time.Duration) string { return dur(d) }

// Runs says "1 run" or "N runs".
func Runs(n int) string { return runs(n) }

// ShortRate formats a rate for a chart's label (12.3k).
func ShortRate(v float64) string { return shortRate(v) }

// CPUModel is the machine's CPU model name, or "".
func CPUModel() string { return cpuModel() }

// LoadAverage is the 1, 5 and 15 minute load averages, or "".
func LoadAverage() string { return loadAverage() }
