//go:build unix

package connset

import "syscall"

// fileLimit returns the soft limit on the process's open files.
func fileLimit() (uint64, bool) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, false
	}
	return uint64(l.Cur), true
}
