// Package runtime is the core of wizard: a node that adds handlers by
// pattern and acts on messages, in the Seneca / MicroWizard tradition.
//
// To Add is to register a [Handler] for a pattern such as
// "role:math,cmd:sum". To Act is to send a message: the node finds the added
// pattern that best matches the message and runs its handler.
//
//	node, _ := runtime.New()
//	node.Add("role:math,cmd:sum", func(ctx context.Context, req runtime.Request) (any, error) {
//		a, _ := req.Float64("a")
//		b, _ := req.Float64("b")
//		return map[string]any{"r": a + b}, nil
//	})
//	res, err := node.Act(ctx, "role:math,cmd:sum", map[string]any{"a": 1, "b": 2})
//
// There are two ways to act:
//
//   - [Node.Act] routes by every root field of the message, overlaid with
//     the pattern's pairs (the pattern wins), as Seneca's act does.
//   - [Node.ActE] routes by the pattern alone (plus the fields named by
//     [Mixin]) and hands the handler the data as it is. Pattern strings are
//     parsed once and cached. It is the fast path, and what generated
//     clients use through [NewClient].
//
// Both return a [Result]: its [Result.Value] is what the handler returned,
// and [Result.Decode] converts it into a typed value (a protobuf message, a
// struct, a map).
//
// The same calls reach handlers on other nodes: give the node a [Transport]
// (runtime/tcp, runtime/quic) with [WithTransport], serve with [WithListen],
// and find peers with [WithDiscovery] ([StaticPeers], or gossip). The best
// match over local and remote patterns wins; a local handler is preferred
// for the same pattern.
//
// Messages are protobuf messages (what generated stubs use), maps
// (map[string]any or map[string]string), JSON object bytes, or nil.
//
// # One behaviour in-process and remote
//
// A handler reads the same values, and a caller gets the same outcome,
// whether the call stayed in the process or crossed TCP or QUIC
// (runtime/internal/parity runs one handler suite all three ways):
//
//   - [Request.Get] reads a map or JSON field as JSON decoding gives it:
//     numbers float64, objects map[string]any, arrays []any (a caller's
//     Go int 1 reads 1.0 in-process too); pattern values are strings;
//     protobuf fields are their protoreflect values. [Request.Float64],
//     [Request.Int64], [Request.String] and [Request.Bool] read a scalar
//     whatever its form (Go numeric kinds, json.Number, numeric strings,
//     since 1 and "1" route alike) and allocate nothing.
//   - An error's code and message are the same; its details are read
//     alike with [Error.DetailAs] (one detail, into a message of its type)
//     or [Error.AnyDetails] (all, as google.protobuf.Any). The Details
//     field itself holds the handler's messages in-process, and remotely
//     the decoded ones, or an *anypb.Any for a type the caller's binary
//     does not register.
//   - A handler's nil, nil (or a nil *Res) reaches an untyped caller as a
//     nil [Result.Value] and a typed [Client] as an empty *Res, never nil.
//   - A panic is [CodeInternal] with the same message.
//
// What differs: [Request.Msg] and [Result.Value] are the values as sent
// in-process (decode with [Request.Decode] and [Result.Decode] to read
// them alike), and errors.Is finds a handler's own error only in-process.
//
// # Patterns
//
// A pattern is key:value[,key:value...]; see [pattern.Parse] for the syntax.
// Whitespace around keys, colons and commas is ignored, and a value may be
// double-quoted to hold ',' or ':'. Values compare as strings: integers in
// decimal, floats in their shortest JavaScript form (1.0 is "1"), booleans as
// "true" and "false", so 1, "1" and 1.0 are the same value. A nil value drops
// its key. Keys ending in '$' are metadata and never route. Only root-level
// scalar fields of a message route; nested maps and lists never do. Added
// patterns may use globs in values: '*' matches any run of characters and
// '?' exactly one; '*' never matches a missing key. The canonical form
// ([pattern.Pattern]'s String) lists keys in byte order.
//
// # Precedence
//
// When several added patterns match a message, the answer is the one
// Seneca's matcher (patrun, with globs on) gives. Keys of all patterns are
// sorted by byte order and tested one level at a time: at a level, an exact
// value match is tried first, then glob patterns for that key in the order
// they were added; a level whose key a pattern lacks is passed through a
// "skip" branch. The walk goes down greedily and the deepest handler seen
// wins; it returns to a skipped branch only while no handler has been found,
// and the empty (catch-all) pattern counts as found. In practice:
//
//   - a:1 and a:1,b:1 — {a:1,b:2} finds a:1; {a:1,b:1} finds a:1,b:1;
//   - a:0, b:1, c:2 — {b:1,c:2} finds b:1 (the first key in byte order wins a tie);
//   - a:1,b:2 and a:1,c:3 — {a:1,b:9,c:3} finds a:1,c:3;
//   - x:1,y:2,z:3 and y:2 — {x:1,y:2} finds y:2;
//   - role:x,cmd:* and role:x,cmd:get — cmd:get finds the exact one, cmd:put the glob;
//   - a:1 and a:*,b:2 — {a:1,b:2} finds a:1 (exact beats glob at the same key).
//
// Adding an identical pattern twice is an error unless the handler is added
// with [Override]; the old handler then becomes the new one's prior
// ([Request.Prior]). [pattern.Router] is the matcher on its own. After a
// removal it answers as a router built from the remaining patterns would
// (patrun keeps empty nodes that can hide wider patterns; wizard prunes
// them). [Node.Explain] says which pattern wins for a message, why each
// other match loses ([pattern.Candidate]), and where a call would go (the
// wizard command's explain).
//
// # Errors
//
// Every error a call returns carries a [Code] (gRPC's names and numbers):
// use [CodeOf], or errors.As with [*Error]. The sentinels [ErrNotFound],
// [ErrResourceExhausted], [ErrUnimplemented] and others match any error with
// their code through errors.Is; [ErrClosed] marks calls on a closed node.
//
//   - No matching pattern: [CodeNotFound], naming the message's pattern,
//     unless the call set [Default] — when every peer the node knows has
//     answered with its catalog. A node answering a remote caller names
//     neither itself (its id) nor Go types in its messages, and repeats at
//     most the first 128 bytes of a pattern.
//   - No matching pattern while some peers the node knows cannot be
//     reached (down, refusing connections, never answered, on another
//     transport): [CodeUnavailable], as the node cannot know that none of
//     them serves it; the message names the first three of them (and how
//     many more) and why each is unreachable ("connection refused",
//     "on transport quic; this node speaks tcp"). A pattern whose peers
//     are all unreachable is unavailable likewise, naming them. These are
//     the calling node's own errors: they name peers by id and address.
//   - [Node.WaitFor] past its context: the context's code, naming the
//     pattern waited for and the peers known (transport, connected or
//     not, the last dial error). [Node.Members] lists the same, with a
//     peer's [introspect.Member] Transport and LastError.
//   - A node over its [WithMaxInFlight] limit: [CodeResourceExhausted],
//     without running the handler.
//   - A call sent again after its connection dropped, whose answer the
//     serving node no longer kept: [ErrAnswerDropped] ([CodeDataLoss],
//     which the runtime gives no other error); the call ran once.
//   - A handler's *Error reaches the caller as is; any other error becomes
//     [CodeUnknown] with its message (in-process, errors.Is still finds the
//     original). A panicking handler becomes [CodeInternal] for that call;
//     the panic and its stack go to the node's logger, never to the caller.
//   - Bad input — a malformed pattern ([*pattern.ParseError]), an unsupported
//     message type, invalid JSON, a nil handler — is an error value, never a
//     panic.
//
// # Remote calls
//
// A pattern served by several peers has a [Balancer] (unless
// [WithBalancer] says otherwise, the power of two choices that avoids
// peers answering more than twice as slowly as the other of the pair,
// failing, or silent while calls wait on them, else takes the one with
// fewer calls in flight; runtime/lb has the MicroWizard ring and others) and,
// with [WithBreakers], a circuit breaker per peer. A node over its
// [WithMaxInFlight] limit refuses calls without running them, and the
// caller moves on to the next peer; only when every peer refuses does it
// see an error that matches [ErrResourceExhausted]. A call that surely did
// not run goes to another peer; one that may have run goes to another peer
// only when it is [Idempotent], within a retry budget. A call that is not
// idempotent is sent again, same id, to the same run of its peer when its
// connection drops after it was written — once that run of the peer is
// back, within the call's deadline and at most 20s (a second when the peer
// went silent rather than closed the connection) — and the serving node
// answers the copy from its de-duplication table ([WithDedup]): the
// handler runs once. A copy whose answer the table dropped for room (other
// callers' answers filled it) gets [ErrAnswerDropped], [CodeDataLoss]: the
// call ran, and its answer is lost.
// A call made with [WaitForReady] that finds no target able to take it
// (its peers, or the broker they sit behind, restarting) waits for one
// within its deadline instead of failing at once, as gRPC's wait-for-ready.
// A stored answer is bound to its caller: to a token the caller sends only
// to that node (random per peer, so no other peer learns it), to the
// certificate the caller presented under mutual TLS, and to the call's
// pattern and payload; metadata copied from another caller's calls never
// reaches it. [Node.Stats] counts
// refusals, retries, calls sent again and duplicates.
//
// # Node identity
//
// A peer is routed only as a node discovery announced at its address:
// one whose catalog answers under another id or run is not routed. Under
// TLS a certificate proves it: a CA names a node's id in the node's
// certificate by the URI SAN wizard://node/<id> ([NodeURI]). A peer whose
// verified server certificate names an id is routed only while its
// catalog answers as that id, so a member that relays another node's
// catalog gets none of its calls; with [WithRequirePeerIdentity] a peer
// whose certificate names no id (or who has none, over plain TCP) is not
// routed either. A transport's connections tell the certificate through
// [PeerCertificateConn]. On the serving side, under mutual TLS,
// [Request.Source] reports the id the caller's certificate names, whatever
// id the caller states.
//
// # Metadata
//
// A call carries [Metadata] beside its message, as gRPC metadata and
// connect headers do: trace context, credentials, request ids. A caller
// attaches it to the calls it makes with a ctx,
//
//	ctx = runtime.AppendMetadata(ctx, "request-id", id)
//
// and a handler (or a handler interceptor) reads it with
// [IncomingMetadata]. What a handler received stays with it: the calls it
// makes with its ctx carry none of it unless it copies it
// ([WithMetadata](ctx, IncomingMetadata(ctx)) forwards it all). Keys are
// lower-case ASCII; a call carries at most 8 KiB of it, else
// it fails before it is sent. [Request.Source] gives what the caller
// cannot write: the calling node's id, the address and transport the
// call came by, and, under mutual TLS, the certificate the transport
// verified ([Identity]). Call interceptors add metadata by passing a
// derived ctx to the next [Invoker]. In-process calls see exactly what
// remote ones do; a call without metadata costs nothing for it.
//
// # Limits
//
// A node bounds what other nodes make it parse and keep. A pattern it
// receives (a call's, the pattern a call's message is overlaid with, a
// peer catalog's) is at most 4 KiB and 64 keys ([WithMaxPatternSize]); a
// call's metadata at most 8 KiB a value and 16 KiB in all
// ([WithMaxMetadataSize]). Over a limit a call is answered
// [CodeInvalidArgument] before anything is parsed, and a catalog is
// rejected whole. Parsing costs O(n log n) in a pattern's keys. Parsed
// patterns are cached twice, for the node's own calls and for calls from
// other nodes (only patterns that lead to a handler), each cache at most
// 4096 entries and 8 MiB; peers' catalogs are cached by digest, at most
// 4096 and 16 MiB; a catalog a peer replaces, or stops announcing,
// leaves that cache unless another peer has it loaded or announced (a
// peer that leaves does not take its catalog out). Past a bound a cache
// starts over.
//
// # Logging
//
// A node logs through slog. By default the records at Warn and above go
// to slog.Default(), so that a program that configures nothing still sees
// them on its standard error: a panicking handler (with its stack), a
// peer that cannot be dialled (once when it starts failing, then at Debug
// while it keeps failing, with the error: "connection refused"), a
// connection to a peer lost, a peer on another transport, a catalog
// rejected. [WithLogger] replaces the default (and Debug and Info records
// then go to it when its handler enables them);
// WithLogger(slog.New(slog.DiscardHandler)) silences the node. Records at
// Warn and above are rate-limited per message, at most 10 in 10 s, then
// one record with the count held back. A panic's stack is one attribute,
// "stack", a string of its lines (a JSON handler keeps them in one
// string); through slog's standard default handler, which would quote
// it onto one line, the stack follows the record's line, one frame a
// line, as Go prints a panic.
//
// # Lifecycle
//
// [Node.Close] and [Node.Shutdown] stop new calls and wait for running
// handlers (including [NoReply] ones) to finish. A node with discovery
// leaves the mesh first, then stops accepting remote calls (goaway), lets
// them and local calls drain, and closes its connections to peers.
//
// [Node.Health] tells where a node is, and [introspect.HealthPattern] tells peers and
// probes ([CheckHealth]); [Node.Ready] is true while it is serving:
//
//	not_serving  listening, discovery not started yet (New has not returned)
//	serving      New returned: listener accepting, discovery started
//	draining     from Shutdown's first moment until it returns; after the
//	             goaway, probes get no answer (an error matching ErrNotSent)
//	not_serving  Shutdown (or Close) returned
//
// Ready does not wait for peers: use [Node.WaitFor] for a dependency. The
// health answer is outside the in-flight accounting: a node over its
// [WithMaxInFlight] limit is still serving. Patterns with sys:wizard are
// the node's own ([introspect.CatalogPattern], [introspect.HealthPattern]); [Node.Add] refuses
// them. Package runtime/health serves the same states to HTTP probes
// (Kubernetes' readiness and liveness).
package runtime

// Where things are, one concept per file. Patterns, their values and the
// patrun router are runtime/internal/patrun (public as runtime/pattern);
// discovery's contract is runtime/discovery; the records of Members,
// Patterns and Route are runtime/introspect.
//
//	node.go         Node, New and its validation, Add, Remove, WaitFor, Close, Shutdown
//	option.go       Option, HandlerOption, CallOption and their constructors
//	act.go          Act and ActE; callArgs and callRoute, the one route-then-call step of every call
//	ready.go        WaitForReady: a call that waits within its deadline for a target able to take it
//	client.go       the typed Client (what generated clients are made of), NewClient
//	spec.go         Spec, Method and MethodOption: what names a call, typed or not
//	handler.go      Handler, Request, interceptors, NewUnaryHandler, route entries
//	source.go       Source, Identity, Remote: who made the call a handler serves
//	patterncache.go pattern strings parsed once, with their cached resolution
//	limit.go        the bounds on what other nodes send: pattern and metadata sizes, the patterns of their calls
//	message.go      reading fields of maps, JSON and protobuf; Act's merged map
//	field.go        Request's fields as JSON decoding gives them (Get), typed getters
//	metadata.go     Metadata, AppendMetadata, WithMetadata, IncomingMetadata: what a call carries beside its message
//	codec.go        payload encoding for the wire, lazily decoded replies
//	result.go       Result
//	resultjson.go   a Result's value as JSON
//	error.go        Error, Code, the sentinels
//	detail.go       an Error's details read alike in-process and remotely
//	logger.go       the node's logger: WithLogger's, else Warn and above to slog.Default(), rate-limited
//	observe.go      Observer, WithObserver: what a node's calls go through beyond what interceptors see
//	stats.go        Stats
//	transport.go    the transport contract: Transport, Listener, Conn, Server, their optional interfaces; Message and who owns its memory
//
// The remote path, caller side:
//
//	call.go         one remote call: its wire message, deadline, picks and attempts, each with an outcome
//	retry.go        what an outcome means (next target, retry, done), the retry budget, backoff, the final error
//	refeed.go       sending a call again, same id, to the same run of its peer after its connection dropped
//	requestbody.go  a call's protobuf message left to its connection to encode
//	pool.go         the pools of remote calls, giving a reply back to its connection, the uses of unsafe
//	balance.go      Target, Balancer (the default: latency-aware power of two choices), Breaker (a no-op one without WithBreakers)
//	load.go         what a node knows of each peer's answers: calls in flight, latency
//	unreachable.go  what a failed call says of the peers the node cannot reach
//
// The remote path, serving side:
//
//	serve.go        a call from another node: its handler, in-flight accounting, its reply
//	replybody.go    a handler's protobuf result left to the transport to encode
//	dedup.go        the de-duplication table that makes a refed call run once
//	dedupran.go     a copy whose answer the table dropped for room: ErrAnswerDropped
//	dedupshare.go   answers the table keeps by reference rather than copied
//
// Peers and discovery:
//
//	remote.go       the node's remote side: listener, discovery, start and stop
//	discovery.go    StaticPeers; the node's side of discovery: peers reported up and down
//	peer.go         one peer: its connection, dialled and redialled, its lifecycle
//	catalog.go      pattern catalogs: served, pulled (or confirmed by digest), cached by digest, routed
//	schema.go       Schema (served on introspect.DescribePattern): the protobuf files of a node's typed patterns; Describe, DescribePeer
//	peertypes.go    WithPeerTypes: the message types of peers' typed patterns, learnt from their schemas
//	health.go       Health, CheckHealth, Node.Ready (served on introspect.HealthPattern)
//	members.go      Members and Patterns: what the node knows of the mesh
//	explain.go      Explain and Route: how the node routes a message, and why
//	identity.go     a peer routed only as the node announced at its address and named by its certificate
//	nodecert.go     node ids named by certificates (wizard://node/<id>), WithRequirePeerIdentity
