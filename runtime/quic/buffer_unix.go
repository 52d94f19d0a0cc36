//go:build linux || darwin || freebsd

package quic

import (
	"net"
	"syscall"
)

// socketBuffers returns c's receive and send buffer sizes as the kernel
// reports them (Linux reports twice the size set, as quic-go expects).
func socketBuffers(c *net.UDPConn) (rcv, snd int, ok bool) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	var rerr, serr error
	err = raw.Control(func(fd uintptr) {
		rcv, rerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
		snd, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
	})
	return rcv, snd, err == nil && rerr == nil && serr == nil
}
