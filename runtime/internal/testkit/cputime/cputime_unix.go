//go:build unix

// Package cputime reads the process's CPU time, for benchmarks that
// report CPU per operation beside wall time.
package cputime

import (
	"syscall"
	"time"
)

// Process is the process's CPU time so far (user and system), or 0 where
// getrusage does not tell.
func Process() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
