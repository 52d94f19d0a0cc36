package quic

import (
	"errors"
	"io"
	"net"
	"time"

	quicgo "github.com/quic-go/quic-go"
)

// stream is a QUIC stream as the mux wants it: an io.ReadWriteCloser whose
// Close stops both directions, as closing a TCP connection would, so that
// the mux's reader and writer goroutines end.
type stream struct {
	s  *quicgo.Stream
	qc *quicgo.Conn
}

// Read reads from the stream. The peer closing the connection in order is
// the end of the stream, as a TCP FIN would be.
func (s stream) Read(p []byte) (int, error) {
	n, err := s.s.Read(p)
	if err != nil {
		var ae *quicgo.ApplicationError
		if errors.As(err, &ae) && ae.Remote && ae.ErrorCode == codeNoError {
			err = io.EOF
		}
	}
	return n, err
}

func (s stream) Write(p []byte) (int, error) { return s.s.Write(p) }

// Close unblocks a Read waiting for data and a Write waiting for flow
// control, and ends the send direction: what was written still reaches
// the peer, then the end of the stream. It sends no STOP_SENDING, which
// would reset the peer's side: a peer still reading the last answers must
// not fail first on a write of its own (a pong, a cancel).
func (s stream) Close() error {
	now := time.Now()
	s.s.SetReadDeadline(now)
	s.s.SetWriteDeadline(now)
	return s.s.Close()
}

// RemoteAddr is the peer's address, for the mux's logs.
func (s stream) RemoteAddr() net.Addr { return s.qc.RemoteAddr() }
