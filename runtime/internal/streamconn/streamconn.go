// Package streamconn is the transport side of streams: what a transport's
// connection offers to open one, and what a node offers a transport to
// serve one. runtime/tcp and runtime/quic implement it over the mux
// (runtime/internal/mux), runtime/nats over its subjects; package runtime
// finds it by type assertion, as it finds a transport's other optional
// capabilities. It is internal while the transport contract lives in
// package runtime: it speaks the wire's types, which runtime's own mirror.
package streamconn

import (
	"context"
	"errors"
	"fmt"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// Opener is a connection (a runtime.Conn) that carries streams.
type Opener interface {
	// OpenStream opens a stream to open.Pattern with open's flags, meta
	// (the caller's headers) and deadline (ctx's, when sooner). It does
	// not wait for the server: a refusal comes as the stream's end, from
	// Recv or Header. The stream lives until its end, ctx's end or
	// Cancel. An error wrapping runtime.ErrNotSent means nothing was
	// sent.
	OpenStream(ctx context.Context, open *wire.Frame) (Client, error)
}

// Client is the calling side of one stream. Send and CloseSend may be
// called by one goroutine while another calls Recv and Header.
type Client interface {
	// Send sends one message, waiting for the stream's flow control at
	// most until ctx ends. The stream does not keep payload.
	Send(ctx context.Context, codec wire.Codec, payload []byte) error
	// CloseSend tells the server the client sends nothing more.
	CloseSend() error
	// Recv returns the next message: io.EOF after the server ended the
	// stream with OK, an *Error when it ended with a code, another error
	// when the stream was lost (the connection, ctx). The payload is the
	// caller's.
	Recv(ctx context.Context) (wire.Codec, []byte, error)
	// Header waits for the server's headers, or the stream's end (nil
	// headers, and the end's error unless it ended with OK).
	Header(ctx context.Context) ([]wire.Meta, error)
	// Trailer returns the server's trailers once Recv returned the end.
	Trailer() []wire.Meta
	// Cancel gives up on the stream; the server is told.
	Cancel()
}

// Server is a server (a node's runtime.Server) that serves streams.
type Server interface {
	// ServeStream runs the handler of s's pattern and returns the
	// stream's end: nil for OK, an *Error for a code. ctx carries the
	// stream's deadline and ends when the caller cancels or is lost.
	ServeStream(ctx context.Context, s Stream) error
}

// Stream is the serving side of one stream. Send and SendHeader may be
// called by one goroutine while another calls Recv.
type Stream interface {
	// Open returns the stream's open frame: pattern, flags, deadline, and
	// meta (the caller's headers). The server must not modify it.
	Open() *wire.Frame
	// Recv returns the next message from the caller, io.EOF after its
	// CloseSend. The payload is the server's.
	Recv(ctx context.Context) (wire.Codec, []byte, error)
	// Send sends one message, waiting for flow control at most until ctx
	// ends. The stream does not keep payload.
	Send(ctx context.Context, codec wire.Codec, payload []byte) error
	// SendHeader sends the server's headers: at most once, before any
	// message.
	SendHeader(meta []wire.Meta) error
	// SetTrailer sets the trailers the stream's end carries.
	SetTrailer(meta []wire.Meta)
}

// Error is a stream's end with a code other than OK (gRPC's numbering,
// as runtime.Code's). Details are runtime's encoding of its error's
// details, opaque to transports.
type Error struct {
	Code    uint32
	Message string
	Details []byte
	// Refused says that the server ended the stream without running a
	// handler (over its limits, no stream handler, closing): nothing of
	// it ran, and it may be opened on another node.
	Refused bool
}

func (e *Error) Error() string {
	return fmt.Sprintf("wizard: stream ended with code %d: %s", e.Code, e.Message)
}

// ErrUnsupported is the error of OpenStream on a connection whose peer
// does not speak streams (a node from before them): nothing was sent.
var ErrUnsupported = errors.New("wizard: the peer does not speak streams (its handshake lacks the streams feature)")
