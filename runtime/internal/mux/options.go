package mux

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// The defaults for zero [Options] fields.
const (
	DefaultKeepAlive        = 15 * time.Second
	DefaultKeepAliveTimeout = 10 * time.Second

	// DefaultBusyKeepAlive and DefaultBusyKeepAliveTimeout are keep-alive's
	// check interval and ping timeout while calls wait on the peer: a
	// silent peer is found within 1.5 s of its last frame (a ping two
	// looks after it at most, then its timeout), well within
	// a call's default timeout (5 s), so calls that may be sent again
	// still can be.
	DefaultBusyKeepAlive        = 250 * time.Millisecond
	DefaultBusyKeepAliveTimeout = time.Second
	DefaultWriteQueue           = 1024
	DefaultHandshakeTimeout     = 10 * time.Second
	DefaultDrainTimeout         = 10 * time.Second

	// DefaultMaxInFlight is twice the callers a busy peer runs at once in
	// the benchmarks (128), so that they are never held back, and few
	// enough goroutines (a few MiB of stacks) per connection for a
	// 2-core node.
	DefaultMaxInFlight = 256

	// DefaultMaxQueued is well above what a busy connection writes at
	// once (tens of KiB) and above a LAN's bandwidth-delay product (1
	// Gbit/s for 1 ms is 125 KB), the kernel's socket buffer adding more.
	DefaultMaxQueued = 1 << 20

	// DefaultServeTimeout is longer than the calling side's default
	// timeout (5s, runtime.WithDefaultTimeout), so that it never cuts a
	// node's call, and bounded.
	DefaultServeTimeout = 30 * time.Second

	// DefaultStreamWindow is a stream's receive window: the protocol's
	// initial window (grpc-go's default stream window is 64 KiB, and
	// grows with the bandwidth-delay product; a fixed 256 KiB fills a
	// LAN's).
	DefaultStreamWindow = wire.InitialWindow

	// DefaultMaxStreams is the streams a server serves at once on one
	// connection (HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS, which
	// gRPC-go leaves unbounded and servers commonly set in the
	// hundreds); with the default window, a connection's streams hold
	// at most 256 MiB of received messages each way.
	DefaultMaxStreams = 1024

	// maxStreamWindow is the largest receive window: a grant always
	// fits one stream-credit frame.
	maxStreamWindow = 1 << 30
)

// bufferSize is the size of the buffers a connection borrows for its
// stream (see streambuffer.go).
const bufferSize = 32 << 10

// Options configure a connection, client or server side. Zero fields take
// the defaults.
type Options struct {
	// MaxFrameSize is the largest frame this side reads, and writes: a
	// request or response above it fails locally rather than reaching a
	// peer that would close the connection over it (peers are expected to
	// share a limit). 0 means [wire.DefaultMaxFrameSize].
	MaxFrameSize int

	// KeepAlive is the interval between pings; 0 means
	// [DefaultKeepAlive], a negative value turns keep-alive off.
	KeepAlive time.Duration

	// KeepAliveTimeout is how long a peer has to answer a ping, or send
	// anything else, before the connection is closed as dead. 0 means
	// [DefaultKeepAliveTimeout].
	// Since a peer that stalls in the middle of a frame cannot answer
	// either, it also bounds how long such a peer holds a connection.
	KeepAliveTimeout time.Duration

	// BusyKeepAlive is keep-alive's interval while this side waits on the
	// peer (calls pending): it pings when nothing came from the peer for
	// that long. 0 means [DefaultBusyKeepAlive]; it is at most KeepAlive.
	BusyKeepAlive time.Duration

	// BusyKeepAliveTimeout is how long the peer has to answer such a
	// ping, or send anything else. 0 means [DefaultBusyKeepAliveTimeout];
	// it is at most KeepAliveTimeout. A peer whose host acknowledged the
	// ping at the TCP level (its kernel took it: see keeper) has
	// KeepAliveTimeout instead.
	BusyKeepAliveTimeout time.Duration

	// hostAcked, when set (by tests), stands in for the kernel's word on
	// whether the peer's host acknowledged anything within d (see
	// hostAcked).
	hostAcked func(d time.Duration) bool

	// Logger receives a record for every connection that closes, with
	// the reason; nil discards them.
	Logger *slog.Logger

	// WriteQueue is, on the client side, how many frames may wait for
	// the writer goroutine before callers block; 0 means
	// [DefaultWriteQueue]. (The server side bounds its answers by bytes,
	// with MaxQueued.) Control frames may exceed it by as much again.
	WriteQueue int

	// HandshakeTimeout bounds the handshake; 0 means
	// [DefaultHandshakeTimeout].
	HandshakeTimeout time.Duration

	// DrainTimeout bounds, on the server side, how long a shutdown waits
	// for in-flight handlers after the goaway before it closes the
	// connection and cancels them; 0 means [DefaultDrainTimeout].
	DrainTimeout time.Duration

	// MaxInFlight bounds, on the server side, the requests whose handlers
	// run at once on the connection; 0 means [DefaultMaxInFlight]. At the
	// bound the server stops reading the connection until one returns,
	// so that the peer's further requests wait in the kernel (whose TCP
	// window then holds the peer back) and cost no goroutine.
	MaxInFlight int

	// MaxQueued bounds, on the server side, the bytes of frames waiting
	// to be written (counted by the buffers that hold them); 0 means
	// [DefaultMaxQueued]. At the bound the server stops reading the
	// connection until the writer has caught up, so that a peer that does
	// not read costs at most MaxQueued plus an answer per request in
	// flight.
	MaxQueued int

	// ServeTimeout is, on the server side, the deadline of a request that
	// arrives without one, as if its caller had sent it (counted from the
	// moment its handler first looks at its context, at once for the
	// runtime's handlers); 0 means [DefaultServeTimeout]. It also bounds
	// a handler that runs on after its connection is lost
	// ([wire.FlagKeep]).
	ServeTimeout time.Duration

	// Share, on the server side, is the part of a node's in-flight limit
	// the connection's caller may take (see [Budget]); nil means no
	// limit but MaxInFlight.
	Share *Share

	// Bounds, on the server side, are the bounds of the connection this
	// stream is one of (see [Bounds]), which its streams share in place
	// of their own MaxInFlight and MaxQueued; nil: the stream is the
	// connection.
	Bounds *Bounds

	// Room, on the server side, makes each request's record with room of
	// the handler's own beside it: it returns a new, zero record that is
	// a field of a struct it allocated, a zero buffer for the request's
	// frame to be read into, and that struct, which the request's handler
	// gets back from [RoomOf] on its context. A record is never reused
	// once its handler has been called: it lives, as its context, as long
	// as anything holds it. The buffer is the room's: see Done.
	// nil: records alone, each with its own buffer.
	Room func() (*Request, *RequestBuf, any)
	// RoomSize is the bytes a room adds to a record, counted, with the
	// record, for a request waiting for a handler (see MaxQueued).
	RoomSize int
	// Done, with Room, is called with a request's room once the server
	// is done with the request: its handler has returned and its answer
	// is encoded (or it had none to send). From then on nothing of the
	// mux reads the request's buffer, nor the answer frame its handler
	// returned: the room may reuse them, if its handler knows that
	// nothing else holds them either. It is not called for a request
	// dropped before its handler ran. nil: nothing is told.
	Done func(room any)

	// Watch, on the server side, is the watch over requests served
	// inline (see [Watcher]) that the connection shares with others: the
	// accepting side's, made by whoever owns the connections. nil: the
	// connection makes one of its own.
	Watch *Watcher

	// StreamWindow is this side's receive window per stream, in bytes of
	// message payloads (each message counting [wire.MessageCost] more):
	// the messages a stream holds for Recv, beyond one, before its
	// sender blocks. 0 means [DefaultStreamWindow], grown for a stream
	// of large messages (see flow.MaxGrown); it is at least
	// [wire.InitialWindow] (the protocol's, which the peer starts with;
	// the difference is granted at open) and at most 1 GiB.
	StreamWindow int

	// autoWindow: StreamWindow was left to its default, which grows.
	autoWindow bool

	// MaxStreams bounds, on the server side, the streams open at once on
	// the connection; 0 means [DefaultMaxStreams]. A stream opened
	// beyond it ends at once with resource_exhausted, without running.
	MaxStreams int

	// ServeStream, on the server side, serves a stream (see
	// [StreamHandler]); nil: streams end at once with unimplemented.
	ServeStream StreamHandler

	// end, set by [ServeDetached], is called with what Serve would
	// return; Serve then returns once serving has started.
	end func(error)
}

// normalize validates o and fills in the defaults.
func (o Options) normalize() (Options, error) {
	switch {
	case o.MaxFrameSize < 0 || uint64(o.MaxFrameSize) > wire.MaxFrameSize ||
		(o.MaxFrameSize > 0 && o.MaxFrameSize < wire.MinFrameSize):
		return o, fmt.Errorf("wizard: mux: MaxFrameSize %d out of range [%d, %d]", o.MaxFrameSize, wire.MinFrameSize, uint64(wire.MaxFrameSize))
	case o.KeepAliveTimeout < 0:
		return o, fmt.Errorf("wizard: mux: negative KeepAliveTimeout %v", o.KeepAliveTimeout)
	case o.BusyKeepAlive < 0 || o.BusyKeepAliveTimeout < 0:
		return o, fmt.Errorf("wizard: mux: negative BusyKeepAlive %v or BusyKeepAliveTimeout %v", o.BusyKeepAlive, o.BusyKeepAliveTimeout)
	case o.WriteQueue < 0:
		return o, fmt.Errorf("wizard: mux: negative WriteQueue %d", o.WriteQueue)
	case o.HandshakeTimeout < 0:
		return o, fmt.Errorf("wizard: mux: negative HandshakeTimeout %v", o.HandshakeTimeout)
	case o.DrainTimeout < 0:
		return o, fmt.Errorf("wizard: mux: negative DrainTimeout %v", o.DrainTimeout)
	case o.MaxInFlight < 0:
		return o, fmt.Errorf("wizard: mux: negative MaxInFlight %d", o.MaxInFlight)
	case o.RoomSize < 0:
		return o, fmt.Errorf("wizard: mux: negative RoomSize %d", o.RoomSize)
	case o.MaxQueued < 0:
		return o, fmt.Errorf("wizard: mux: negative MaxQueued %d", o.MaxQueued)
	case o.StreamWindow != 0 && (o.StreamWindow < wire.InitialWindow || o.StreamWindow > maxStreamWindow):
		return o, fmt.Errorf("wizard: mux: StreamWindow %d out of range [%d, %d]", o.StreamWindow, wire.InitialWindow, maxStreamWindow)
	case o.MaxStreams < 0:
		return o, fmt.Errorf("wizard: mux: negative MaxStreams %d", o.MaxStreams)
	case o.ServeTimeout < 0:
		return o, fmt.Errorf("wizard: mux: negative ServeTimeout %v", o.ServeTimeout)
	}
	if o.MaxFrameSize == 0 {
		o.MaxFrameSize = wire.DefaultMaxFrameSize
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = DefaultKeepAlive
	}
	if o.KeepAliveTimeout == 0 {
		o.KeepAliveTimeout = DefaultKeepAliveTimeout
	}
	if o.BusyKeepAlive == 0 {
		o.BusyKeepAlive = DefaultBusyKeepAlive
	}
	if o.BusyKeepAliveTimeout == 0 {
		o.BusyKeepAliveTimeout = DefaultBusyKeepAliveTimeout
	}
	if o.KeepAlive > 0 {
		o.BusyKeepAlive = min(o.BusyKeepAlive, o.KeepAlive)
	}
	o.BusyKeepAliveTimeout = min(o.BusyKeepAliveTimeout, o.KeepAliveTimeout)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.WriteQueue == 0 {
		o.WriteQueue = DefaultWriteQueue
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.MaxQueued == 0 {
		o.MaxQueued = DefaultMaxQueued
	}
	if o.ServeTimeout == 0 {
		o.ServeTimeout = DefaultServeTimeout
	}
	if o.StreamWindow == 0 {
		o.StreamWindow, o.autoWindow = DefaultStreamWindow, true
	}
	if o.MaxStreams == 0 {
		o.MaxStreams = DefaultMaxStreams
	}
	return o, nil
}
