//go:build unix

package mux

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// pipeRaw is a syscall.RawConn over a non-blocking pipe's read end whose
// waits, on the reading goroutine, run wait instead of the poller.
type pipeRaw struct {
	fd   uintptr
	wait func() error
}

func (p pipeRaw) Read(f func(uintptr) bool) error {
	for !f(p.fd) {
		if err := p.wait(); err != nil {
			return err
		}
	}
	return nil
}
func (pipeRaw) Control(func(uintptr)) error    { return nil }
func (pipeRaw) Write(func(uintptr) bool) error { return errors.ErrUnsupported }

// newPipeReader returns a raw reader of a pipe, the pipe's write end, and
// a pointer to the wait the reader runs when the pipe is empty.
func newPipeReader(t *testing.T) (*reader, *os.File, *func() error) {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close(); pw.Close() })
	fd := pr.Fd()
	if err := syscall.SetNonblock(int(fd), true); err != nil {
		t.Skipf("no non-blocking pipe: %v", err)
	}
	wait := new(func() error)
	b := newReader(pr)
	b.raw = pipeRaw{fd: fd, wait: func() error { return (*wait)() }}
	b.onReadable = b.readable
	return b, pw, wait
}

// TestReaderWaitsWithoutBuffer: a raw reader holds no buffer while it
// waits for bytes with none buffered, and keeps the bytes of a frame
// begun while it waits for the rest.
func TestReaderWaitsWithoutBuffer(t *testing.T) {
	b, pw, wait := newPipeReader(t)
	frame := wire.AppendFrame(nil, &wire.Frame{Type: wire.TypeRequest, ID: 7, Pattern: "cmd:echo", Payload: []byte("hello")})
	send := func(p []byte) func() error {
		return func() error {
			_, err := pw.Write(p)
			return err
		}
	}

	waits := 0
	*wait = func() error {
		waits++
		if b.buf != nil {
			t.Errorf("wait %d: the reader holds a buffer with nothing in it", waits)
		}
		return send(frame)()
	}
	var f wire.Frame
	if _, err := wire.ReadFrame(b, 0, &f, nil); err != nil {
		t.Fatal(err)
	}
	if f.ID != 7 || string(f.Payload) != "hello" || waits != 1 {
		t.Fatalf("frame %d %q after %d waits, want 7 \"hello\" after 1", f.ID, f.Payload, waits)
	}

	// Half a frame, then a wait for the rest: the half stays buffered.
	half := len(frame) / 2
	if err := send(frame[:half])(); err != nil {
		t.Fatal(err)
	}
	waits = 0
	*wait = func() error {
		waits++
		if b.Buffered() == 0 && b.buf != nil {
			t.Errorf("wait %d: the reader holds a buffer with nothing in it", waits)
		}
		return send(frame[half:])()
	}
	if _, err := wire.ReadFrame(b, 0, &f, nil); err != nil {
		t.Fatal(err)
	}
	if f.ID != 7 || string(f.Payload) != "hello" {
		t.Fatalf("frame %d %q, want 7 \"hello\"", f.ID, f.Payload)
	}

	// The end of the stream: io.EOF, and no buffer kept.
	pw.Close()
	*wait = func() error { t.Fatal("waited at the end of the stream"); return nil }
	if _, err := wire.ReadFrame(b, 0, &f, nil); err != io.EOF {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}
	if b.buf != nil {
		t.Error("the reader keeps its buffer after the end of the stream")
	}
}

// chunked reads its bytes a random few at a time.
type chunked struct {
	b   []byte
	rnd *rand.Rand
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.b), 1+c.rnd.IntN(3*bufferSize/2))
	n = copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}

// TestReaderReadsAsBufio reads a stream of frames of every size, from a
// buffer and a half down to none, through the reader, raw and not, and
// through a bufio.Reader: the same frames come out.
func TestReaderReadsAsBufio(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var stream []byte
	var frames []*wire.Frame
	for i := range 200 {
		size := rnd.IntN(3 * bufferSize / 2)
		if i%3 == 0 {
			size = rnd.IntN(64)
		}
		p := make([]byte, size)
		for j := range p {
			p[j] = byte(rnd.Uint32())
		}
		f := &wire.Frame{Type: wire.TypeResponse, ID: uint64(i + 1), Payload: p}
		frames = append(frames, f)
		stream = wire.AppendFrame(stream, f)
	}
	readAll := func(t *testing.T, r wire.BufferedReader) {
		t.Helper()
		for i, want := range frames {
			var f wire.Frame
			if _, err := wire.ReadFrame(r, 4<<20, &f, nil); err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
			if f.ID != want.ID || !bytes.Equal(f.Payload, want.Payload) {
				t.Fatalf("frame %d: id %d, %d bytes; want id %d, %d bytes", i, f.ID, len(f.Payload), want.ID, len(want.Payload))
			}
		}
		var f wire.Frame
		if _, err := wire.ReadFrame(r, 4<<20, &f, nil); err != io.EOF {
			t.Fatalf("at the end: %v, want io.EOF", err)
		}
	}
	t.Run("bufio", func(t *testing.T) {
		readAll(t, bufio.NewReaderSize(&chunked{stream, rand.New(rand.NewPCG(3, 4))}, bufferSize))
	})
	t.Run("stream", func(t *testing.T) {
		readAll(t, newReader(&chunked{stream, rand.New(rand.NewPCG(3, 4))}))
	})
	t.Run("raw", func(t *testing.T) {
		b, pw, wait := newPipeReader(t)
		rest := stream
		*wait = func() error { // feed the pipe a random few bytes at a time
			if len(rest) == 0 {
				return pw.Close()
			}
			n := min(len(rest), 1+rnd.IntN(3*bufferSize/2), 16<<10)
			_, err := pw.Write(rest[:n])
			rest = rest[n:]
			return err
		}
		readAll(t, b)
	})
}

// failing fails every write after its first n bytes.
type failing struct {
	n   int
	got []byte
}

var errWrite = errors.New("write failed")

func (f *failing) Write(p []byte) (int, error) {
	if len(f.got)+len(p) > f.n {
		k := f.n - len(f.got)
		f.got = append(f.got, p[:k]...)
		return k, errWrite
	}
	f.got = append(f.got, p...)
	return len(p), nil
}

// TestWriterBorrows: the writer holds a buffer only while bytes wait in
// it, writes what a bufio.Writer writes, and keeps its first error.
func TestWriterBorrows(t *testing.T) {
	var out bytes.Buffer
	w := writer{w: &countingWriter{w: &out}}
	var want []byte
	for _, size := range []int{10, bufferSize - 20, 100, 3 * bufferSize, 5, bufferSize, 0, 1} {
		p := bytes.Repeat([]byte{byte(size)}, size)
		want = append(want, p...)
		if n, err := w.Write(p); n != size || err != nil {
			t.Fatalf("Write(%d bytes) = %d, %v", size, n, err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if w.buf != nil {
		t.Error("the writer keeps its buffer after Flush")
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("wrote %d bytes, not the %d written to it", out.Len(), len(want))
	}
	if err := w.Flush(); err != nil || w.buf != nil {
		t.Errorf("an empty Flush: %v, buffer kept %v", err, w.buf != nil)
	}

	f := &failing{n: 50}
	w = writer{w: &countingWriter{w: f}}
	if _, err := w.Write(make([]byte, 40)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, bufferSize)); err != errWrite {
		t.Fatalf("a write past the failure: %v, want %v", err, errWrite)
	}
	if _, err := w.Write([]byte{1}); err != errWrite {
		t.Errorf("a write after the failure: %v, want %v", err, errWrite)
	}
	if err := w.Flush(); err != errWrite {
		t.Errorf("Flush after the failure: %v, want %v", err, errWrite)
	}
}
