//go:build unix

package mux

import (
	"io"
	"syscall"
)

// tryWriter writes to a socket without waiting: what the kernel takes at
// once, nothing more (see sendDirect).
type tryWriter struct {
	rc  syscall.RawConn
	fn  func(uintptr) bool // do, bound once: passing it allocates nothing
	p   []byte
	n   int
	err error
}

// newTryWriter returns a tryWriter for rw, or nil when rw is not a socket
// this side can write to without waiting (a TLS connection, a pipe).
func newTryWriter(rw io.ReadWriteCloser) *tryWriter {
	sc, ok := rw.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	w := &tryWriter{rc: rc}
	w.fn = w.do
	return w
}

func (w *tryWriter) do(fd uintptr) bool {
	for {
		n, err := syscall.Write(int(fd), w.p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			n, err = 0, nil // the socket's buffer is full: the writer goroutine waits for room
		case n < 0:
			n = 0
		}
		w.n, w.err = n, err
		return true // never wait for the socket to become writable
	}
}

// write writes what of p the socket takes at once, and reports how much.
// An error is the stream's: nothing more can be written.
func (w *tryWriter) write(p []byte) (int, error) {
	w.p, w.n, w.err = p, 0, nil
	if err := w.rc.Write(w.fn); err != nil {
		w.p = nil
		return 0, err
	}
	w.p = nil
	return w.n, w.err
}
