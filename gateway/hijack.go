package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"sync"
)

// wsBufferSize is the size of a WebSocket connection's read and write
// buffers. net/http hands a hijacked connection its own 4 KiB ones, which
// the WebSocket library keeps for the connection's life: 8 MiB for a
// thousand connections whose frames are mostly a few hundred bytes. A
// frame larger than the buffer is read into and written from the
// message's own bytes, past the buffer.
const wsBufferSize = 1024

// hijackWriter is the ResponseWriter given to websocket.Accept: its
// Hijack hands over the connection with wsBufferSize buffers instead of
// net/http's, and keeps the connection for write deadlines (a deadline
// per frame instead of a context and its timer).
type hijackWriter struct {
	http.ResponseWriter
	conn  net.Conn     // set by Hijack
	batch *batchWriter // under the write buffer, set by Hijack
}

// Hijack hijacks the connection and wraps it in small buffers, holding
// the bytes net/http read past the handshake (a client's first frames).
func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil { // empty after the 101, but say so
		c.Close()
		return nil, nil, err
	}
	var br *bufio.Reader
	if n := brw.Reader.Buffered(); n > 0 {
		// The bytes read ahead go into the new buffer, where the
		// library finds them (it keeps what is buffered, not the
		// reader under the buffer).
		ahead, _ := brw.Reader.Peek(n)
		br = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(bytes.Clone(ahead)), c), max(wsBufferSize, n))
		if _, err := br.Peek(n); err != nil {
			c.Close()
			return nil, nil, err
		}
	} else {
		br = bufio.NewReaderSize(c, wsBufferSize)
	}
	w.conn = c
	w.batch = &batchWriter{c: c}
	return c, bufio.NewReadWriter(br, bufio.NewWriterSize(w.batch, wsBufferSize)), nil
}

// Unwrap returns the ResponseWriter it wraps, for http.ResponseController.
func (w *hijackWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// batchWriter is the writer under a WebSocket connection's write buffer:
// the library flushes every frame it writes, one write system call per
// frame. While the connection's writer has several frames to send, it
// holds them here (hold) and writes them with one system call
// (release); otherwise the bytes go straight to the connection. A
// frame the library writes meanwhile on its own (a pong, the close) is
// held with them, in the order written.
type batchWriter struct {
	mu   sync.Mutex // held through a write: the bytes go out in order
	c    net.Conn
	buf  *[]byte // the held bytes; nil unless holding
	size int     // len(*buf), read by the writer between frames
}

// batchBufs are the held bytes' buffers, shared by the connections: one
// is taken for a batch and given back once it is written, so that an
// idle connection holds none.
var batchBufs = sync.Pool{New: func() any { b := make([]byte, 0, wsBatchBytes+wsBufferSize); return &b }}

// wsBatchBytes and wsBatchFrames bound a batch: once it holds either,
// it is written. Beyond 16 frames a batch saves little more (1/16 of a
// system call a frame), and the bound keeps its first frame from waiting
// on a writer that keeps finding more behind it.
const (
	wsBatchBytes  = 32 << 10
	wsBatchFrames = 16
)

func (w *batchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf == nil {
		return w.c.Write(p)
	}
	*w.buf = append(*w.buf, p...)
	w.size = len(*w.buf)
	return len(p), nil
}

// hold keeps what is written from now on until release.
func (w *batchWriter) hold() {
	w.mu.Lock()
	if w.buf == nil {
		w.buf = batchBufs.Get().(*[]byte)
	}
	w.mu.Unlock()
}

// held is the bytes held so far.
func (w *batchWriter) held() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.size
}

// release writes the held bytes with one write and stops holding.
func (w *batchWriter) release() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf == nil {
		return nil
	}
	var err error
	if len(*w.buf) > 0 {
		_, err = w.c.Write(*w.buf)
	}
	if cap(*w.buf) <= 2*(wsBatchBytes+wsBufferSize) { // a frame larger than a batch does not keep its room
		*w.buf = (*w.buf)[:0]
		batchBufs.Put(w.buf)
	}
	w.buf, w.size = nil, 0
	return err
}
