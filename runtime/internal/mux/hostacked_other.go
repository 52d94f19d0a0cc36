//go:build !linux || 386

package mux

import (
	"io"
	"time"
)

// hostAcked has no TCP_INFO to read here (see hostacked_linux.go):
// keep-alive has no evidence of the peer's host beyond its answers.
func hostAcked(io.ReadWriteCloser, time.Duration) bool { return false }
