//go:build !unix

package mux

import (
	"io"
	"syscall"
)

// rawConn returns nil: only Unix systems read a descriptor themselves
// (see streambuffer.go).
func rawConn(io.Reader) syscall.RawConn { return nil }

func readFD(uintptr, []byte) (int, error) { return 0, syscall.EINVAL }
