//go:build linux && !386

package mux

import (
	"io"
	"net"
	"syscall"
	"time"
	"unsafe"
)

// hostAcked reports whether the peer's host acknowledged, at the TCP
// level, everything this side has sent, or anything within the last d:
// its kernel is up and reachable, even when its process has not answered
// (a starved CPU, a long pause). It reads the socket's TCP_INFO (the
// segments sent and not acknowledged; the time since the last ACK came),
// and reports false for a connection no longer established, or when rw is
// not a TCP connection or TLS over one: keep-alive then has no such
// evidence. (A segment not sent yet is not counted as unacknowledged: it
// waits for the peer's window, which its kernel announces.)
func hostAcked(rw io.ReadWriteCloser, d time.Duration) bool {
	var nc any = rw
	if u, ok := nc.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		nc = u.NetConn()
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	var info syscall.TCPInfo
	var errno syscall.Errno
	size := uint32(syscall.SizeofTCPInfo)
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_INFO,
			uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&size)), 0)
	}); err != nil || errno != 0 {
		return false
	}
	// Last_ack_recv is in milliseconds, of the kernel's clock ticks (up
	// to 10ms): an ACK just after a ping may read as one before it, which
	// Unacked, exact, covers.
	return info.State == tcpEstablished && (info.Unacked == 0 || time.Duration(info.Last_ack_recv)*time.Millisecond < d)
}

// tcpEstablished is Linux's TCP_ESTABLISHED state in TCP_INFO.
const tcpEstablished = 1
