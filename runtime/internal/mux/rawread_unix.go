//go:build unix

package mux

import (
	"io"
	"net"
	"syscall"
)

// rawConn returns the descriptor of rd, a TCP or Unix connection, for
// reads that wait for bytes without a buffer (see streambuffer.go), or
// nil for any other stream.
func rawConn(rd io.Reader) syscall.RawConn {
	var sc syscall.Conn
	switch c := rd.(type) {
	case *net.TCPConn:
		sc = c
	case *net.UnixConn:
		sc = c
	default:
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// readFD reads the non-blocking descriptor fd into p once, as the net
// package does (EINTR retried).
func readFD(fd uintptr, p []byte) (int, error) {
	for {
		n, err := syscall.Read(int(fd), p)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			n = 0
		}
		return n, err
	}
}
