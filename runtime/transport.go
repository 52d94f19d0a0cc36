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
// without touching the runtime. runtime/tcp, runtime/quic, runtime/nats
// and runtime/microwizard implement it; a node uses one through
// [WithTransport].
//
// A transport implements Transport, [Listener] and [Conn]: Listen hands
// inbound calls to a [Server] until its Listener stops, and Dial returns
// a Conn. Its optional capabilities, each found by a type assertion and
// each with a fallback when absent, are [AddrChecker] on the Transport
// and [GoAwayConn], [PeerCertificateConn], [BodyCaller] and
// [ReplyReleaser] on a Conn; a Conn with a Reason() error method (why it
// ended, nil while open: runtime/tcp's) has that reason named in the
// node's warning when the connection to a peer is lost. A node's Server offers the transport
// [KeyRouter], [BodyServer] and [InFlightLimiter]. [Message] says who
// owns a call's and a reply's memory, and when a transport may reuse it.
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

// BodyCaller is a [Conn] that encodes a protobuf request itself,
// straight into the request's frame, sparing the node a marshalled copy
// of the payload. runtime/tcp's Conn implements it. A node calls CallBody
// in place of Call for a request it left unencoded (a protobuf message
// whose encoding cannot fail); on a Conn without it, the node encodes the
// payload, once per call, and calls Call. A BodyCaller's Call and
// CallBody keep nothing of the call's message once they return, so the
// node reuses it for a later call; the message given to any other Conn
// is left to the collector (see [Message]).
type BodyCaller interface {
	Conn
	// CallBody is Call for a message m whose payload is body, size bytes
	// long, still to encode: m.Payload is empty. size is proto.Size's,
	// whose sizes the message caches (proto.MarshalOptions{UseCachedSize:
	// true} may use them). Neither CallBody nor Call keeps m, or anything
	// m points to, once it returns, nor returns m as the reply.
	CallBody(ctx context.Context, m *Message, body proto.Message, size int) (*Message, error)
}

// reasonConn is a [Conn] that tells why it ended (runtime/tcp's does): a
// node names the reason when it warns that a connection to a peer was
// lost (the peer did not answer a ping in time, it closed the connection,
// a read failed), where a Conn without it gives only the peer's address.
// Unexported, as the front page is full: a transport implements it by
// the method alone.
type reasonConn interface {
	Conn
	// Reason returns why the connection ended, or nil while it is open.
	Reason() error
}

// ReplyReleaser is a [Conn] that returns its replies in memory it pools
// (runtime/tcp's: one record holds the answer's frame, its metadata and a
// small answer's body, and the reply's Payload, Error and Meta alias it)
// and takes that memory back. A node gives back a reply when nothing it
// handed out can reach the reply any more, which [Message] says when; a
// reply never given back, and every reply of a Conn without
// ReleaseReply, is left to the collector.
type ReplyReleaser interface {
	Conn
	// ReleaseReply takes back m, a reply that the connection's Call or
	// CallBody returned. A node calls it at most once per reply, and
	// nothing reads or writes m, or anything m points to, afterwards.
	ReleaseReply(m *Message)
}

// Server is what a [Listener] hands inbound calls to; a node gives one to
// its transport's Listen. ctx carries the caller's remaining deadline and
// is cancelled when the caller cancels or goes away. It returns the reply,
// or nil for a call with NoReply set. The reply may be m itself, rewritten
// (the request's metadata slice reused for the reply's): a transport must
// not read m after ServeMessage returns except through the reply (see
// [Message] for who owns what).
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

// BodyServer is a [Server] that may leave a protobuf result for the
// transport to encode, straight into the answer's frame. A node's Server
// is one; runtime/tcp and runtime/quic call ServeMessageBody in place of
// ServeMessage. A transport that calls ServeMessage gets every reply with
// its payload encoded.
type BodyServer interface {
	Server
	// ServeMessageBody is ServeMessage for a transport that encodes a
	// protobuf reply itself. When body is not nil the reply has no
	// payload: body, size bytes long, is to be encoded as the payload
	// (size is proto.Size's, whose sizes the message caches:
	// proto.MarshalOptions{UseCachedSize: true} may use them). free
	// reports that the reply took m's place and that nothing holds m, or
	// anything m points to, once the reply is encoded: the transport may
	// then reuse the request's memory for another request (see [Message]).
	ServeMessageBody(ctx context.Context, m *Message) (reply *Message, body proto.Message, size int, free bool)
}

// InFlightLimiter is a [Server] that bounds the calls it runs at once. A
// node's Server is one, whose MaxInFlight is its [WithMaxInFlight] limit.
// A transport that serves many connections (runtime/tcp and runtime/quic)
// or callers (runtime/nats) gives each a fair share of the limit,
// refusing a connection's calls beyond its share as the node refuses
// calls beyond the limit; with a Server without it, or a limit of 0, the
// transport shares nothing and the node alone refuses.
type InFlightLimiter interface {
	Server
	// MaxInFlight returns the limit; 0 means none.
	MaxInFlight() int
}

// Message is one call or reply as a [Transport] carries it.
//
// A message, and the memory it points to (its Payload, Meta and strings),
// belongs to one side at a time. This is the rule for every transport and
// for the node; the pools of the node and of the stream transports follow
// it.
//
//   - A call's message is the node's. A [Conn] reads it during Call (or
//     CallBody) and, when it is a [BodyCaller], keeps nothing of it once
//     that returns: the node then reuses the message for a later call. A
//     Conn that is not a BodyCaller may keep it, and the node leaves it
//     to the collector.
//   - A reply that a Conn returns is the node's from then on; the Conn
//     never writes it again. When the Conn is a [ReplyReleaser], the node
//     gives the reply back, at most once, only when nothing the node
//     handed out can reach it: the reply of a typed call ([Client.Call])
//     on a node without call interceptors, for a protobuf result type,
//     once it was decoded without an error into the caller's own message
//     (protobuf's Unmarshal copies bytes and strings). Every other reply
//     is left to the collector: a [Result] handed to a caller or a call
//     interceptor, which may keep it; an error reply, whose Error and
//     details alias the reply's memory; a reply that failed to decode; a
//     non-protobuf result (decoding into an *any may return the payload as
//     it is). The balancer, breakers and observers learn an attempt's
//     code, never its reply.
//   - A call a [Listener] hands to [Server.ServeMessage], and the memory
//     it points to, is the transport's, lent to the node until the reply
//     is encoded: a handler may hold its request, and the reply may be
//     the call's message itself, rewritten. The transport reads the call
//     afterwards only through the reply, and reuses the call's memory only
//     when [BodyServer.ServeMessageBody] reports it free; otherwise it
//     leaves it to the collector.
//   - A reply the node returns is the transport's to encode, and to read
//     only: the node may hold its payload as well (the de-duplication
//     table keeps a reply for a copy of the call, by reference when the
//     node encoded the payload for that reply alone).
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
	// The node's record of the ownership rule above:
	//
	// in is the node's decoded view of Payload; on a reply of a
	// ReplyReleaser, in.pool is that Conn, which the reply goes back to.
	//
	// owned is set on a reply whose Payload the node encoded for it alone
	// (a marshalled protobuf result: see ownedPayload): nothing else holds
	// or writes its bytes.
	//
	// deferBody is set on a call whose transport encodes a protobuf reply
	// itself (it called ServeMessageBody).
	//
	// body and bodyLen are a payload not yet encoded and its size: on a
	// call, the request left to a BodyCaller; on a reply, the result left
	// to the transport (deferBody).
	//
	// lent is set on a call once a Conn that is not a BodyCaller had it:
	// the node never reuses the message.
	//
	// copied is set on a served call by a handler that decoded its request
	// into a message of its own and keeps nothing of the call
	// (NewUnaryHandler's); on the reply that took the call's place, it
	// reports that nothing holds the call's memory once the reply is
	// encoded (ServeMessageBody's free).
	in        raw
	owned     bool
	deferBody bool
	lent      bool
	copied    bool
	body      proto.Message
	bodyLen   int

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
