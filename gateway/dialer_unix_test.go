//go:build unix

package gateway

import (
	"net"
	"syscall"
)

// smallBufferDialer dials with a 4 KiB receive buffer.
func smallBufferDialer() *net.Dialer {
	return &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
}
