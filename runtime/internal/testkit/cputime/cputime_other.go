//go:build !unix

// Package cputime reads the process's CPU time, for benchmarks that
// report CPU per operation beside wall time.
package cputime

import "time"

// Process is 0: the process's CPU time is read with getrusage, on unix.
func Process() time.Duration { return 0 }
