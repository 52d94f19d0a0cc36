// Package nats is a wizard transport over a NATS broker, for meshes that
// gossip and direct connections cannot span (across networks, NAT,
// clusters or regions): calls travel as NATS request/reply through the
// broker, and everything else stays the runtime's.
//
//	tr, err := nats.New(nats.WithURL("nats://10.0.0.7:4222"), nats.WithCredentials("node.creds"))
//	if err != nil {
//		return err
//	}
//	node, err := runtime.New(
//		runtime.WithTransport(tr),
//		runtime.WithListen(":0"), // port 0 picks a subject of its own: wizard.node.<random>
//		runtime.WithDiscovery(d), // d, err := nats.NewDiscovery(tr)
//	)
//
// # Subjects
//
// Each node listens on a subject of its own, its address
// ("wizard.node.<random>", or the subject given to runtime.WithListen), so
// that wizard's balancer, breakers, refeeding and de-duplication pick and
// watch nodes as over TCP; the broker only carries. A caller sends every
// call of all its connections over one broker connection and one reply
// subscription, <inbox>.*, each call with a reply subject of its own.
// A node says it is going away, or gone, on <subject>.ctl, to which its
// callers subscribe.
//
// A message's data is one wizard frame (runtime/internal/wire): type,
// flags, codec, the caller's remaining deadline, pattern, metadata and
// payload; or a batch of them, one after another. A call of the
// single-frame form is named by its reply subject; a cancel is a message
// to the node's subject with the call's reply subject, and cancels the
// handler's ctx. Under concurrency the broker's work per message is most
// of a call's cost, so a caller batches: the requests (and cancels) it
// sends to one node while a publish to it is in progress go in one
// message, with the reply subject <inbox>.0, each frame named by the
// call's id; the node answers those calls with batches too, the replies
// to one caller that queue while it publishes going in one message. A
// lone call is sent at once, in a message of its own. A batch holds at
// most 64 frames and 64 KiB (or the broker's max_payload, if smaller).
// A node says in its pong that it reads batches; a caller batches only
// to nodes that said so, and sends the single-frame form to the others
// (older nodes), so that the two versions mix in one mesh. A message on a
// node's subject that is malformed, oversized or unexpected, or a batch
// with such a frame, is dropped whole with a rate-limited record (see
// [WithLogger]); it never ends the listener, and decoding it allocates at
// most the frames' metadata slices.
//
// # Streams
//
// A stream (server-, client- or bidirectional streaming) travels as the
// stream frames of runtime/internal/wire (stream-open, -data, -close,
// -end, -credit, -header, and cancel), one frame a NATS message, with
// the semantics of the mux's streams over TCP
// (runtime/internal/mux). A node says in its pong that it serves streams
// (when its runtime.Server does); a caller opens none to a node that did
// not, which fails as not sent. The caller opens a stream with a
// stream-open to the node's subject, whose reply subject, <inbox><id>,
// names the stream: every frame of the caller's goes to the node's
// subject with it, and every frame of the node's goes to it, through the
// caller's one reply subscription. No subscription is made per stream.
// The frames of each side are numbered (their id, from 1): NATS core may
// drop messages on the way (to a slow consumer), and a stream a frame of
// which is missing ends with unavailable rather than lose a message
// unseen.
//
// Flow control is the mux's, per stream and per direction, in bytes of
// message payloads: each side starts with 256 KiB of credit
// (wire.InitialWindow), spends a message's size plus 64 bytes
// (wire.MessageCost) when it sends it, may send when the message fits
// its credit or when at least half the window is free (so that a larger
// message goes, alone), and gets the bytes back in a stream-credit once
// the receiver has taken half its window. The default window grows for
// a stream of large messages whose reader keeps up, up to 4 MiB, within
// 16 MiB for the streams between a caller and a node
// ([WithStreamWindow] sets a fixed one). NATS core has none of its
// own: a receiver that stops reading stops its sender (Send blocks,
// until its ctx ends) and holds at most its window plus one message. A
// peer that sends beyond its credit has its stream ended with resource
// exhausted, the data dropped. The node may send its headers once,
// before any message; it ends the stream when its handler returns, with
// a code (OK, the handler's, canceled, deadline exceeded, unknown) and
// trailers; a caller's Cancel, or its ctx ending, is a cancel frame that
// ends the handler's ctx; the open carries ctx's deadline, at which the
// node ends the handler's ctx and the stream with deadline exceeded (the
// caller then sends no cancel). Streams have no deadline but that one:
// [WithServeTimeout] does not apply.
//
// NATS has no connection between a caller and a node whose loss would
// end a stream: each side watches the other while streams are open. A
// caller pings a node it has heard nothing from for the stream
// keep-alive interval, and a node pings, on a stream's subject, a caller
// it has heard nothing from for as long, which answers on the node's
// subject (one ping per caller and node, whatever the number of
// streams); a side that gets no answer within the timeout, or whose ping
// the broker answers that no one listens (the peer's process died), ends
// the streams, both sides as lost (unavailable): within the interval
// plus the timeout, 1s and 2s by default ([WithStreamKeepAlive]). The
// caller ends its connection to the node too, as its call keep-alive
// would ([WithKeepAlive]). A lost broker connection ends every
// open stream on that side at once, as lost; a stream is never carried
// on again once the connection is back, while calls are (see # Errors).
// A graceful shutdown refuses new streams as going away and waits for
// the open ones within its grace; those still open then end as lost on
// the caller's side.
//
// # Discovery
//
// [Discovery] finds nodes through the broker: each announces its id, run,
// subject, transport and the digest of its pattern set on
// "wizard.discovery" every heartbeat (1s) and when its patterns change; a
// node joining asks the others to announce themselves at once, and so
// does a node whose broker connection comes back; a node leaving says so, and one not heard from for the dead-node timeout (5s)
// is dropped. A node that only calls (no runtime.WithListen) learns the
// mesh without being announced. runtime/swim stays usable beside it, for
// the nodes that gossip: discovery.Multi runs both on one node,
// which is then found by the nodes that gossip and by those that listen
// to the broker, and is down only once both say so.
//
// # Limits
//
// A listener serves at most [WithMaxServing] calls at once (4096) and
// refuses those beyond at once. A node's runtime.WithMaxInFlight limit is
// shared among its callers, each known by its reply inbox, as a TCP
// listener shares it among connections: a flood from one caller does not
// take the others' room. A listener serves at most [WithMaxStreams]
// streams at once per caller (1024), and as many streams in all as
// [WithMaxServing] says of calls (4096), and refuses those beyond at
// once, their handlers not run (resource exhausted, flagged refused); a
// stream
// takes neither a part of its caller's share of the in-flight limit nor
// one of [WithMaxServing]'s calls (an idle stream must not shed calls). A
// caller's streams so hold at most WithMaxStreams x (window + one
// message) of received messages on a node, and a caller each of its
// streams' window plus one message. Decoding a message allocates at most
// its metadata slice; messages over [WithMaxFrameSize] or the broker's
// max_payload are dropped unread; a stream's message is one frame, so
// the same bound applies to it.
//
// # Errors
//
// A call fails as not sent ([runtime.ErrNotSent], "wizard: nats:
// <subject>: call not sent: <why>") only when it surely never reached a
// node: the publish failed (the broker connection is down: nothing is
// buffered while it reconnects), the broker answered that no one listens
// on the subject, or the node had said it is going away. When the broker
// connection is lost with calls in flight, they fail as lost after being
// sent ("connection lost after the call was sent"), as on a lost TCP
// connection, so that the runtime refeeds them, and every connection
// ends; the transport reconnects with nats.go's backoff ([WithReconnect])
// and the runtime dials again. A caller pings a silent node (see
// [WithKeepAlive]); the broker answers at once that no one listens for a
// node whose process died.
//
// # Trust
//
// The broker is the trust boundary: whoever may publish on a node's
// subject may call every pattern it serves, and whoever may subscribe to
// it sees the calls. There is no per-call identity
// ([runtime.Message.Identity] is empty; de-duplication binds stored
// answers to the caller's token). Give each node credentials
// ([WithCredentials], [WithNKeySeed]) and connect over TLS ([WithTLS]).
// A node that serves, on a subject of its own (runtime.WithListen
// "wizard.node.pay", say), needs
//
//	publish:   wizard.node.>, wizard.discovery, _INBOX.>
//	subscribe: wizard.node.pay, wizard.node.*.ctl, wizard.discovery, _INBOX.>
//
// (calls and pings to the nodes; announcements; replies to its callers'
// inboxes; its calls; the control subjects of the nodes it calls); a node
// that only calls needs the same but publishing to _INBOX.> and
// subscribing to a subject of its own. Streams need no other grant: a
// caller sends every frame of its streams, and its answers to a node's
// pings, to the node's subject. A missing permission is a
// [*PermissionError] naming the subject and the operation: a refused
// subscription fails the Listen (the node is not announced), the Dial,
// or the Discovery's Start; a refused publish fails the calls to that
// subject as not sent; a refused reply (a server that may not publish to
// _INBOX.>) is logged by the server, its callers hearing nothing.
package nats
