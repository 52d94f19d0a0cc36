package mux

import (
	"io"
	"syscall"
)

// A connection's stream buffers, its reader's and its writer's, are
// borrowed from a pool while bytes are in them, not owned: an idle
// connection holds neither. The writer borrows one for a batch of frames
// and gives it back once it has flushed them. The reader of a stream
// that exposes its file descriptor (a TCP connection: see rawConn) waits
// for bytes without a buffer: it reads the descriptor itself, as the net
// package would, and gives the buffer back when a read finds nothing
// there and nothing is left in the buffer, before it waits. That costs
// no system call more than a net.Conn's Read. Other streams (TLS, QUIC,
// pipes) borrow the reader's buffer on their first read and keep it.

// reader is the buffered reader of a connection's stream: what
// *bufio.Reader is to wire.ReadFrame, with a borrowed buffer.
type reader struct {
	rd  io.Reader
	raw syscall.RawConn // rd's descriptor, when it exposes one: reads wait without a buffer
	buf *[]byte         // borrowed; nil while the reader has none
	r   int             // buffered bytes are (*buf)[r:w]
	w   int
	err error // the stream's error, once it failed; sticky

	// reads counts the reads of the stream: frames read while it stays
	// the same came in one read (see server.arrival).
	reads uint64
	// drained is set when the last read into the buffer left room in
	// it: the stream had nothing more at that moment (see
	// server.directLocked).
	drained bool

	// A raw stream's read: its callback, where it reads (nil: the
	// buffer), and what read(2) returned.
	onReadable func(fd uintptr) bool
	into       []byte
	n          int
	errno      error
}

func newReader(rd io.Reader) *reader {
	b := &reader{rd: rd, raw: rawConn(rd)}
	if b.raw != nil {
		b.onReadable = b.readable
	}
	return b
}

// Buffered returns the number of bytes that can be read without reading
// the stream.
func (b *reader) Buffered() int { return b.w - b.r }

// Peek returns the next n bytes (n <= bufferSize) without consuming them,
// or the bytes buffered and the stream's error when it ends first.
func (b *reader) Peek(n int) ([]byte, error) {
	for b.w-b.r < n && b.err == nil {
		b.fill()
	}
	if b.buf == nil {
		return nil, b.err
	}
	if b.w-b.r < n {
		return (*b.buf)[b.r:b.w], b.err
	}
	return (*b.buf)[b.r : b.r+n], nil
}

// Discard skips the next n bytes, reading the stream for those not
// buffered.
func (b *reader) Discard(n int) (int, error) {
	done := 0
	for {
		k := min(n-done, b.w-b.r)
		b.r += k
		done += k
		if done == n {
			return done, nil
		}
		if b.err != nil {
			return done, b.err
		}
		b.fill()
	}
}

// Read reads into p: the bytes buffered, else one read of the stream,
// straight into p when p is at least a buffer long.
func (b *reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.r == b.w {
		if b.err != nil {
			return 0, b.err
		}
		if len(p) >= bufferSize {
			n, err := b.read(p)
			if err != nil {
				b.fail(err)
			}
			return n, err
		}
		b.fill()
		if b.r == b.w {
			return 0, b.err
		}
	}
	n := copy(p, (*b.buf)[b.r:b.w])
	b.r += n
	return n, nil
}

// fill reads the stream once into the free end of the buffer, after
// moving the buffered bytes to its start. A raw stream borrows the buffer
// only once bytes have come.
func (b *reader) fill() {
	if b.buf != nil && b.r > 0 {
		b.w = copy(*b.buf, (*b.buf)[b.r:b.w])
		b.r = 0
	}
	b.reads++
	var n int
	var err error
	if b.raw != nil {
		n, err = b.fillRaw()
	} else {
		if b.buf == nil {
			b.buf = streamBuffers.Get().(*[]byte)
		}
		n, err = b.rd.Read((*b.buf)[b.w:])
		if n == 0 && err == nil {
			err = io.ErrNoProgress
		}
	}
	b.w += n
	b.drained = b.buf != nil && b.w < len(*b.buf)
	if err != nil {
		b.fail(err)
	}
}

// fail records the stream's error and gives the buffer back if it is
// empty.
func (b *reader) fail(err error) {
	b.err = err
	if b.r == b.w {
		b.release()
	}
}

// release gives the empty buffer back.
func (b *reader) release() {
	if b.buf != nil {
		streamBuffers.Put(b.buf)
		b.buf, b.r, b.w = nil, 0, 0
	}
}

// fillRaw reads the raw stream into the buffer, borrowing it when bytes
// are there and giving it back, if empty, when there are none.
func (b *reader) fillRaw() (int, error) {
	b.into = nil
	err := b.raw.Read(b.onReadable)
	return rawResult(b.n, b.errno, err)
}

// read reads the stream once, straight into p.
func (b *reader) read(p []byte) (int, error) {
	b.reads++
	if b.raw == nil {
		n, err := b.rd.Read(p)
		if n == 0 && err == nil {
			err = io.ErrNoProgress
		}
		return n, err
	}
	b.into = p
	err := b.raw.Read(b.onReadable)
	b.into = nil
	return rawResult(b.n, b.errno, err)
}

// readable is the raw stream's read (b.onReadable, bound once: a closure
// per read would be allocated): one read(2) into b.into, else into the
// buffer, borrowed for it. It reports false, to wait, when the stream
// has nothing; the buffer, if empty, goes back first.
func (b *reader) readable(fd uintptr) bool {
	if b.into != nil {
		b.n, b.errno = readFD(fd, b.into)
		return b.errno != syscall.EAGAIN
	}
	if b.buf == nil {
		b.buf = streamBuffers.Get().(*[]byte)
	}
	b.n, b.errno = readFD(fd, (*b.buf)[b.w:])
	if b.errno == syscall.EAGAIN {
		if b.w == 0 {
			b.release()
		}
		return false
	}
	return true
}

// rawResult is what a read of a raw stream returns: n bytes, or the
// error of the wait (err: the connection closed, a deadline) or of the
// read (errno), or io.EOF for a read of none.
func rawResult(n int, errno, err error) (int, error) {
	switch {
	case err != nil:
		return 0, err
	case errno != nil:
		return 0, &fdReadError{errno}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// fdReadError is a failed read(2) of a raw stream, as net reports one.
type fdReadError struct{ errno error }

func (e *fdReadError) Error() string { return "read: " + e.errno.Error() }
func (e *fdReadError) Unwrap() error { return e.errno }

// writer is the buffered writer of a connection's stream: a
// *bufio.Writer whose buffer is borrowed for the bytes waiting in it and
// given back by Flush. A write of at least a buffer goes to the stream at
// once, with the bytes buffered before it in the same system call
// (writev), not copied.
type writer struct {
	w   *countingWriter
	buf *[]byte // borrowed while bytes wait in it
	n   int     // bytes waiting: (*buf)[:n]
	err error   // the first write's error; sticky
}

// Write buffers p, writing the buffer out whenever it fills; a write at
// least a buffer long goes straight to the stream, after the bytes
// buffered.
func (b *writer) Write(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(p) >= bufferSize {
		if b.n == 0 {
			n, err := b.w.Write(p)
			b.err = err
			return n, err
		}
		n, err := b.w.writeTwo((*b.buf)[:b.n], p)
		if err != nil {
			b.err = err
			return max(n-b.n, 0), err
		}
		b.n = 0
		return len(p), nil
	}
	nn := 0
	for len(p) > bufferSize-b.n {
		n := copy((*b.buf)[b.n:], p)
		b.n += n
		nn += n
		p = p[n:]
		if err := b.flush(); err != nil {
			return nn, err
		}
	}
	if len(p) == 0 {
		return nn, nil
	}
	if b.buf == nil {
		b.buf = streamBuffers.Get().(*[]byte)
	}
	n := copy((*b.buf)[b.n:], p)
	b.n += n
	return nn + n, nil
}

// writeTwo writes a and then b to the stream, in one system call where
// the stream takes a vector (a TCP connection), and counts the bytes it
// took.
func (w *countingWriter) writeTwo(a, b []byte) (int, error) {
	w.two = [2][]byte{a, b}
	w.vec = w.two[:]
	n, err := w.vec.WriteTo(w.w) // w.vec, not a local: that would escape
	w.two, w.vec = [2][]byte{}, nil
	w.n += n
	return int(n), err
}

// Flush writes the buffered bytes to the stream and gives the buffer
// back.
func (b *writer) Flush() error {
	if err := b.flush(); err != nil {
		return err
	}
	if b.buf != nil {
		streamBuffers.Put(b.buf)
		b.buf = nil
	}
	return nil
}

func (b *writer) flush() error {
	if b.err != nil {
		return b.err
	}
	if b.n == 0 {
		return nil
	}
	n, err := b.w.Write((*b.buf)[:b.n])
	if n < b.n && err == nil {
		err = io.ErrShortWrite
	}
	if err != nil {
		b.err = err
		return err
	}
	b.n = 0
	return nil
}
