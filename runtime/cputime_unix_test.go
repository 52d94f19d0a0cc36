//go:build unix

package runtime_test

import (
	"syscall"
	"time"
)

// cpuTime is the process's CPU time so far (user and system), or 0 where
// getrusage does not tell.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
