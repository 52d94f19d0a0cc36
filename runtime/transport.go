package runtime

import (
	"context"
	"crypto/x509"
	"errors"
	"time"

	"google.golang.org/protobuf/proto"
)

// Transport carries calls between nodes. It works at message level, so
// that transports other than byte streams (a broker, for instance) fit
// without touching the runtime. runtime/tcp and runtime/quic implement it;
// a node uses one through [WithTransport].
type Transport interface {
	// Name names the transport in catalogs and discovery ("tcp", "quic").
	Name() string
	// Listen accepts calls on addr ("host:port"; port 0 picks one) and hands
	// them to s until the listener is shut down.
	Listen(addr string, s Server) (Listener, error)
	// Dial connects to the node listening at addr. The returned connection
	// carries many concurrent calls.
	Dial(ctx context.Context, addr string) (Conn, error)
}

// AddrChecker is a [Transport] that can tell a malformed address before
// dialling it: a node refuses a [StaticPeers] address it rejects when it
// is created, rather than dialling it in vain. runtime/tcp and
// runtime/quic implement it (they take host:port).
type AddrChecker interface {
	Transport
	// CheckAddr returns an error saying what is wrong with addr, nil when
	// the transport can dial it.
	CheckAddr(addr string) error
}

// Listener is the accepting side of a [Transport].
type Listener interface {
	// Addr returns the address peers dial, with the port actually bound.
	Addr() string
	// Shutdown stops accepting, tells connected callers to go away, and waits
	// for running calls until ctx is done.
	Shutdown(ctx context.Context) error
	// Close stops at once.
	Close() error
}

// Conn is a connection to one remote node, safe for concurrent calls.
type Conn interface {
	// Call sends m and waits for the reply. The remaining budget of ctx's
	// deadline travels with the call and cancelling ctx reaches the remote
	// handler. For a message with NoReply set, Call returns (nil, nil) once m
	// is sent. An error that matches [ErrNotSent] with errors.Is guarantees
	// the remote node never saw the call, so it is safe to retry anywhere.
	Call(ctx context.Context, m *Message) (*Message, error)
	// Done is closed when the connection is gone.
	Done() <-chan struct{}
	Close() error
}

// GoAwayConn is a [Conn] that tells whether its peer said goaway: the
// peer is shutting down and takes no new calls. A call that may have run
// when such a connection dropped is not sent again (the run it reached
// will not come back); on a Conn without it, the caller waits for the
// peer within the call's deadline.
type GoAwayConn interface {
	Conn
	// GoAway reports whether the peer said goaway on this connection.
	GoAway() bool
}

// PeerCertificateConn is a [Conn] that tells which certificate its peer
// proved in the TLS handshake. A node routes a peer only as the node id
// that certificate names (see [NodeURI] and [WithRequirePeerIdentity]); on
// a Conn without it, or one that returns nil, the peer proved none.
type PeerCertificateConn interface {
	Conn
	// PeerCertificate returns the leaf certificate the peer presented and
	// the TLS configuration verified, or nil (plain TCP, or verification
	// skipped).
	PeerCertificate() *x509.Certificate
}

// Server is what a [Listener] hands inbound calls to; a node gives one to
// its transport's Listen. ctx carries the caller's remaining deadline and
// is cancelled when the caller cancels or goes away. It returns the reply,
// or nil for a call with NoReply set. The reply may be m itself, rewritten (the request's
// metadata slice reused for the reply's): a transport must not read m
// after ServeMessage returns except through the reply.
//
// A node's Server also has a method MaxInFlight() int, its
// [WithMaxInFlight] limit (0: none): a transport that serves many
// connections may give each a fair share of it, refusing a connection's
// calls beyond its share as the node refuses calls beyond the limit.
type Server interface {
	ServeMessage(ctx context.Context, m *Message) *Message
}

// KeyRouter is a [Server] that tells which keys its node's patterns use.
// A transport that makes a call's pattern from a whole message (a bridge
// to a framework that routes by a message's values) keeps only the pairs
// under those keys: the others never change which handler serves the
// call, and the node's pattern bounds ([WithMaxPatternSize]) then apply
// to what routes, not to the data. A node's Server is one.
type KeyRouter interface {
	Server
	// RoutesBy reports whether a pattern the node routes by has the key k.
	RoutesBy(k string) bool
}

// Message is one call or reply as a [Transport] carries it.
type Message struct {
	// Pattern is, on a call, the pattern to serve (the remote handler's own
	// pattern, in canonical form).
	Pattern string
	// Flags carries NoReply, Idempotent and Retry.
	Flags MessageFlags
	// Codec says how Payload is encoded.
	Codec Codec
	// Meta carries the node's own metadata (the caller's id, the
	// payload's type, the call's id: keys starting with ':') and the
	// caller's [Metadata], as key/value pairs.
	Meta []MetaPair
	// Payload is the encoded message or result. On a failed reply it
	// carries the error's Details, each a length-prefixed
	// google.protobuf.Any.
	Payload []byte
	// Code and Error are set on a reply that failed; Code is CodeOK on
	// success.
	Code  Code
	Error string
	// in is the node's lazily decoded view of Payload.
	in raw
	// owned is set on a reply whose Payload the node encoded for it
	// alone (see ownedPayload): nothing else holds or changes its bytes.
	owned bool
	// deferBody is set on a call by a transport that encodes a protobuf
	// reply itself (see ServeMessageBody); body and bodyLen are then, on
	// the reply, the result not yet encoded and its size.
	deferBody bool
	// lent is set on a call once a connection that may keep it got it
	// (see send): the node then leaves the message to the collector
	// rather than reusing it.
	lent bool
	// copied is set on a call by a handler that decoded its request into
	// a message of its own and keeps nothing of the call (a typed
	// handler's, NewUnaryHandler); on the reply that takes the call's
	// place it reports that nothing holds the call's memory once the
	// reply is encoded (see serveLocal).
	copied  bool
	body    proto.Message
	bodyLen int

	// Deadline is, on the serving side, the caller's remaining budget as
	// received (zero means none); transports set it and the server ctx
	// already honours it.
	Deadline time.Duration

	// Identity is, on the serving side of a call with FlagKeep, what the
	// transport verified of the caller: the fingerprint of the certificate
	// it presented (mutual TLS), empty when it presented none. A node
	// gives a call's stored answer (see [WithDedup]) only to a caller with
	// the same identity; metadata alone, which any caller can write, never
	// suffices.
	Identity string

	// Remote is, on the serving side, what the transport knows of the
	// calling end of the connection the call came on (see [NewRemote]);
	// one per connection. A handler reads it through [Request.Source].
	Remote *Remote
}

// MessageFlags are per-call flags.
type MessageFlags uint8

// The message flags.
const (
	FlagNoReply    MessageFlags = 1 << iota // the caller wants no answer
	FlagIdempotent                          // safe to run more than once
	FlagRetry                               // a retry of an earlier attempt
	// FlagRefused marks a failed reply the node gave without running a
	// handler (over its in-flight limit, no handler, closing): the call
	// did not run, so the caller may send it to another target.
	FlagRefused
	// FlagKeep marks a call the caller may send again, same id, on another
	// connection (see [WithDedup]): the serving transport lets its handler
	// run on if the connection is lost, so that the call sent again joins
	// it, instead of cancelling it.
	FlagKeep
)

// MetaPair is one metadata entry of a [Message].
type MetaPair struct{ Key, Value string }

// Codec identifies how a payload is encoded.
type Codec uint8

// The codecs.
const (
	CodecNone  Codec = 0 // empty payload
	CodecProto Codec = 1 // protobuf binary
	CodecJSON  Codec = 2 // JSON
)

// ErrNotSent marks a transport error after which the call surely did not
// reach the remote node (the connection failed before the request was
// written), so retrying it elsewhere cannot run it twice. Transports wrap it:
// "wizard: tcp: dial 10.0.0.7:7070: call not sent: connect: connection refused".
var ErrNotSent = errors.New("wizard: call not sent")
