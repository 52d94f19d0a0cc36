package gwbench

import "github.com/wizardmesh/wizard/bench/internal/harness"

// The comparison's formats and machine facts, as the harness writes them.
var (
	rate        = harness.Rate
	dur         = harness.Dur
	runs        = harness.Runs
	shortRate   = harness.ShortRate
	cpuModel    = harness.CPUModel
	loadAverage = harness.LoadAverage
)
