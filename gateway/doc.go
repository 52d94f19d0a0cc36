// Package gateway is wizard's edge: HTTP and WebSocket in, [runtime.Node.ActE]
// into the mesh out. The gateway is a wizard node; its route table (YAML,
// gateway/config) maps a method and path template to a pattern template,
// and every request becomes one call of the pattern its route fills in
// (or, on a streaming route, opens a stream of it: see # Streams).
// Only that pattern routes the call: a field of the client's never
// steers it to a narrower pattern (role:users,cmd:delete,admin:true); the
// handler's message holds the pattern's pairs beside the client's fields,
// as [runtime.Node.Act] would give them. The message travels as JSON,
// written from the client's own text of the body where it can be (a
// handler in the gateway's own process then reads a json.RawMessage from
// [runtime.Request.Msg]; [runtime.Request.Decode] and Get read it as any
// JSON message).
//
// Each HTTP request: the route is matched (no route: 404 at once, naming
// method and path; a route for other methods: 405 with Allow); the bearer
// token is verified as the route asks (auth: required, optional or none,
// and the route's scopes: an optional route that needs scopes refuses a
// request without a token, and a token given to an optional route must
// be valid); the message is built from the path's
// variables, the query and the JSON body (the client cannot set the
// route's or the pattern's keys, nor metadata keys ending in '$': 400
// naming the field); the call runs with the route's timeout, or the
// client's hint (header X-Request-Timeout-Ms, a WebSocket frame's
// timeout_ms) clamped to the route's max_timeout; the answer is the
// handler's result as JSON, or an error body.
//
// # Errors
//
// Every error is one JSON body, over HTTP and inside a WebSocket res
// frame alike:
//
//	{"error":{"code":"not_found","message":"...","details":...},"request_id":"..."}
//
// codes being wizard's ([runtime.Code], gRPC's names in snake case).
// Statuses:
//
//	no route                                404 not_found, naming method and path
//	route for other methods                 405, with Allow
//	value outside a variable's allow list   404
//	no node serves the pattern              503 unavailable, Retry-After
//	no answer within the timeout            504 deadline_exceeded
//	overloaded (every target refused)       503 resource_exhausted, Retry-After
//	breakers open, peers unreachable        503 unavailable, Retry-After
//	rate limited (per IP, per subject)      429 resource_exhausted, Retry-After
//	WebSocket: over the in-flight limit     429 (the connection stays)
//	token missing, invalid or expired       401 unauthenticated, WWW-Authenticate
//	scope missing                           403 permission_denied
//	bad input (query, body, hint, fields)   400 invalid_argument
//	body too large                          413
//	body not JSON                           415
//	client gone                             499, logged only
//	delegated auth unavailable              503 (fails closed)
//
// A handler's error answers with its code's status ([StatusOf]):
// invalid_argument, failed_precondition and out_of_range 400,
// unauthenticated 401, permission_denied 403, not_found 404,
// already_exists and aborted 409, unimplemented 501, unavailable and
// resource_exhausted 503, deadline_exceeded 504; internal, unknown and
// data_loss 500 with the message scrubbed to "internal error" (the
// original goes to the log). A pattern nobody serves is told apart from a
// handler's own not_found by the call itself (the gateway calls with
// [runtime.Default] and a value only it holds; a peer that no longer has
// the handler answers an error matching [runtime.ErrNoHandler]), never by
// an error's words; the mesh's own messages (naming peers and addresses) never reach
// a client.
//
// Every response carries X-Request-Id: the client's, when it sends one of
// 1 to 64 letters, digits and "-_.:", else a new random one.
//
// # Metadata
//
// The gateway sets call metadata, and only it: nothing a client sends
// becomes metadata. A handler reads it with
// runtime.IncomingMetadata(ctx).Get(key):
//
//	request-id     the request's id (X-Request-Id)
//	auth-subject   the verified token's subject (authenticated requests only)
//	auth-issuer    its issuer
//	auth-scopes    its scopes, space-separated
//
// The deadline travels as the call context's deadline.
//
// A handler sets the status, headers and cookies of its successful answer
// by returning a [Response] (or its JSON form, an object of exactly the
// keys "http$" and "body"); the gateway's own headers stay its own.
//
// # WebSocket
//
// On the configured path (websocket.path), one text message is one JSON
// object:
//
//	→ {"type":"auth","id":"a1","token":"<jwt>"}
//	→ {"type":"req","id":"42","method":"POST","path":"/api/users/create?x=1","body":{...},"timeout_ms":3000}
//	→ {"type":"cancel","id":"42"}
//	→ {"type":"msg","id":"s1","body":{...}} (a stream's message; see # Streams)
//	→ {"type":"end","id":"s1"}              (a stream's half-close)
//	→ {}                                    (ping; answered {})
//	← {"type":"auth","id":"a1","ok":true,"subject":"u_1","expires_at":"..."}
//	← {"type":"res","id":"42","status":200,"request_id":"...","body":{...}}
//	← {"type":"res","id":"42","status":404,"request_id":"...","error":{"code":"not_found","message":"..."}}
//	← {"type":"res","id":null,"status":400,"error":{"code":"invalid_argument","message":"frame is not valid JSON"}}
//	← {"type":"res","id":"43","status":429,"request_id":"...","error":{...},"retry_after_ms":250}
//	← {"type":"msg","id":"s1","body":{...}} (a stream's message)
//	← {"type":"end","id":"s1","status":200,"request_id":"..."}
//
// Frames have no headers: a 429 or 503 reply carries retry_after_ms
// where HTTP has Retry-After (the exact wait of a rate limit, in
// milliseconds; Retry-After's seconds otherwise).
//
// An id is 1 to 64 bytes, chosen by the client, unique among its
// requests in flight, and echoed on every reply. Many requests may be in
// flight on one connection, up to websocket.max_inflight_per_conn (a
// request over it is answered 429, and the connection stays). A cancel
// frame cancels the request's mesh call (the handler's ctx ends); the
// request is then answered 499 canceled. A frame with an unknown field, a
// wrong type or no id is answered 400 (with its id if it has a readable
// one, else id null), and after three such frames the connection is
// closed (1008).
//
// Authentication happens once per connection, not per message: at the
// upgrade (an Authorization: Bearer header, or an access_token query
// parameter for browsers, which cannot set headers on a WebSocket; a
// token in a URL may be logged by proxies, so prefer the first frame), or
// in an auth frame (a later auth frame replaces the identity: that is how
// a client refreshes its token). An invalid token at the upgrade is a 401
// before any upgrade; in an auth frame it is answered and closes the
// connection (4501). When the token expires the connection is closed
// with 4001: reconnect with a fresh token. Each route's auth and scopes
// apply to each request, as over HTTP (401 / 403 frames).
//
// The Origin of an upgrade must be in websocket.origins (403 otherwise);
// without the list, only same-origin upgrades are accepted. Close codes:
// 1000 normal, 1001 going away (idle, or a shutdown whose grace ran out:
// requests in flight were cut short and may have run), 1008 policy
// (repeated invalid frames), 1009 frame over websocket.max_message, 1012
// service restart (the gateway drained: every request frame it took was
// answered, so one left without a reply never ran and may be sent again
// on a new connection), 1011 internal, 4001 token expired,
// 4008 slow consumer (the send queue, websocket.send_queue, is full),
// 4029 rate limited (ten request frames in a row answered 429 by the
// per-IP or per-subject rate limit; any other reply starts the count
// over, and the in-flight limit's 429s do not count), 4501 invalid token. The gateway sends protocol pings every
// websocket.ping_interval (browsers answer them themselves) and closes a
// connection with 1001 after websocket.idle_timeout without a frame or a
// pong.
//
// # Streams
//
// A route with stream: server, client or bidi (gateway/config) opens a
// mesh stream of its pattern ([runtime.Node.OpenStream]) instead of
// making a call. The call's metadata (request-id, auth-*) is the open's
// metadata, the route's auth, scopes and rate limits apply at the open,
// and the request's message (path variables, query, body, the pattern's
// pairs, built as for a call) is the stream's first message: always for
// a server stream, which is then half-closed; for client and bidi
// streams when the req frame has a body. A stream has no deadline
// unless its route sets a timeout or the client a hint (clamped to
// max_timeout); it is never retried or sent elsewhere once open.
//
// Over the WebSocket, a req frame for a streaming route opens the
// stream, and every frame of the stream carries its id:
//
//	→ {"type":"req","id":"s1","method":"GET","path":"/api/prices/ACME"}
//	← {"type":"msg","id":"s1","body":{...}}          one per message of the service's
//	← {"type":"end","id":"s1","status":200,"request_id":"...","trailer":{"k":["v"]}}
//	← {"type":"end","id":"s1","status":503,"request_id":"...","error":{"code":"unavailable","message":"..."}}
//	→ {"type":"msg","id":"c1","body":{...}}          a client or bidi stream's message
//	→ {"type":"end","id":"c1"}                       the client's half-close
//	→ {"type":"cancel","id":"s1"}                    cancels; the end frame follows, 499 canceled
//
// A stream always ends with one end frame: status 200 with the service's
// trailers, or the error's status and body as in a res frame (a refusal
// at the open too: 401, 403, 429, 503; only a req frame refused before
// its route is looked up, for a repeated id, the in-flight limit or a
// shutdown, is answered with a res frame, stream or not). Closing the
// socket cancels all its streams. A msg or end frame for a server stream, or after the
// client's end frame, ends the stream with 400; one for no open stream
// is answered by a res frame, 400. A client's message larger than the
// mesh carries (its transport's frame limit) ends the stream with 413.
//
// Over HTTP, a server stream's route answers Accept: text/event-stream
// with Server-Sent Events, one event per message and an end event:
//
//	data: {...}
//
//	event: end
//	id: end
//	data: {"status":200,"request_id":"..."}
//
// and any other Accept (application/x-ndjson, */*, none) with
// newline-delimited JSON (application/x-ndjson), a msg line per
// message and an end line:
//
//	{"type":"msg","body":{...}}
//	{"type":"end","status":200,"request_id":"..."}
//
// An error before the first message is an ordinary error answer, with
// its status; after it, the end event or line carries it. A browser's
// EventSource reconnects when a stream ends: close it on the end event
// (its reconnection, which sends Last-Event-ID: end, is answered 204,
// which stops it). The client's leaving cancels the stream. The server's
// write timeout bounds each message's write, not the whole stream.
// Client and bidi streams are WebSocket only (over HTTP: 400
// failed_precondition).
//
// Flow control runs end to end: per stream the gateway receives the
// service's next message only while the ones it queued for the client's
// socket and not yet written are few (16 KiB of frames, and at most
// websocket.send_queue / (2 x max_streams_per_conn) frames; one over
// SSE and NDJSON), so a slow client slows the service (whose Send
// blocks once the mesh's own per-stream window is full) and the gateway
// holds a few messages per stream, websocket.max_streams_per_conn streams
// per connection (16 by default; a req frame opening one more is
// answered with an end frame, 429). An open stream also counts as a
// request in flight (websocket.max_inflight_per_conn). The other way, a stream holds at
// most 4 of the client's messages the service has not taken; past them
// the gateway stops reading the connection until the service takes one.
//
// # Events
//
// A route's events list the event patterns a WebSocket client that
// passes the route's auth and scopes may subscribe to, their values
// filled from the connection's verified identity ({auth.subject},
// {auth.claims.NAME}): "role:match,event:found,user:{auth.subject}"
// lets a user hear their own matches only. A sub frame names a pattern
// (which must hold every pair of an entry as filled: narrower, never
// wider) or a route with one entry, and an id; it is answered by a sub
// frame, ok with the pattern or an error, and the events follow as
// event frames carrying the id:
//
//	→ {"type":"sub","id":"m","route":"matches"}
//	← {"type":"sub","id":"m","ok":true,"pattern":"event:found,role:match,user:42"}
//	← {"type":"event","sub":"m","pattern":"event:found,role:match,user:42","data":{...}}
//	→ {"type":"unsub","id":"m"}
//
// The gateway's node subscribes once per distinct pattern, in a group of
// its own (its node id, so every gateway instance hears every event),
// and fans each event out; the subscription goes with its last socket.
// Each connection's events wait in a queue of websocket.event_queue
// (64); websocket.event_overflow drops the oldest (drop_oldest, the
// default) or closes the connection (close: 4008). [Gateway.EventStats]
// counts them.
//
// # Limits
//
// Bodies are bounded in size (server.max_body, 413) and in time
// (server.read_body_timeout from the end of the headers: 408, and the
// connection closed), as are header reads, writes and idle connections
// (server timeouts). Under a CORS policy every answer says Vary: Origin. Token buckets limit the
// requests per client IP and per token subject (429 with Retry-After);
// the client IP is the peer's, or, from a peer in server.trusted_proxies,
// the rightmost address of X-Forwarded-For that is not itself a trusted
// proxy (the header is ignored from anyone else);
// their tables hold at most 100,000 keys, dropping refilled buckets
// first. CORS answers preflights for the configured origins, methods and
// headers, with credentials when asked. /healthz answers 200 while the
// process serves; /readyz 200 once the node is serving and has joined a
// mesh (it routes a pattern: a peer connected but whose catalog has not
// loaded yet is not enough) and the verifier's keys are loaded, 503 with
// the reason before and during shutdown.
//
// # Logging
//
// One access record per request (and per WebSocket request frame), at
// Info through [WithLogger]'s logger: method, path, route, status,
// duration, request_id, subject, remote. Without WithLogger, Warn and
// above go to slog.Default() and the access log is off.
//
// # Lifecycle
//
// [Gateway.Shutdown] stops accepting connections, lets the requests in
// flight finish, closes each WebSocket with 1012 once its requests are
// answered (new request frames meanwhile get 503), and waits for all that
// up to its grace period; then it closes what is left. The node is the
// caller's to close after.
//
// [Gateway.Reload] applies a new configuration as one (routes, CORS, rate
// limits, auth, bounds); each request is served throughout by the
// configuration it started with, and the listener's settings, which only
// a restart changes, are named rather than half-applied.
package gateway
