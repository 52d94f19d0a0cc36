package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
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
	conn net.Conn // set by Hijack
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
	return c, bufio.NewReadWriter(br, bufio.NewWriterSize(c, wsBufferSize)), nil
}

// Unwrap returns the ResponseWriter it wraps, for http.ResponseController.
func (w *hijackWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
