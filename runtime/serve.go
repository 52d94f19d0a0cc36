package runtime

import (
	"context"
	"encoding/binary"
	"runtime/debug"
	"time"

	"github.com/wizardmesh/wizard/runtime/introspect"
)

// The serving side: a call from another node arrives through nodeServer,
// finds its local handler (serveRemote), passes the de-duplication table
// when it may come again (serveOnce, dedup.go), runs under the node's
// in-flight accounting (dispatch) and becomes a reply (serveLocal).

// nodeServer is the [Server] a node gives its transport's listener.
type nodeServer struct{ n *Node }

func (s nodeServer) ServeMessage(ctx context.Context, m *Message) *Message {
	return s.n.serveRemote(ctx, m)
}

var (
	_ KeyRouter       = nodeServer{}
	_ BodyServer      = nodeServer{}
	_ InFlightLimiter = nodeServer{}
)

// RoutesBy reports whether a pattern the node routes by has the key k.
func (s nodeServer) RoutesBy(k string) bool { return s.n.router.RoutesBy(k) }

// MaxInFlight is [InFlightLimiter.MaxInFlight]: the node's
// [WithMaxInFlight] limit (0: none), which a transport shares fairly
// among its connections.
func (s nodeServer) MaxInFlight() int { return int(s.n.maxInFlight) }

// serveRemote serves a call from another node: the catalog, or the local
// handler of the call's pattern. The metadata and patterns are checked
// against the node's limits first.
func (n *Node) serveRemote(ctx context.Context, m *Message) *Message {
	if err := n.limits.checkMeta(m.Meta); err != nil {
		return errorReply(err)
	}
	if err := forgedCaller(m); err != nil {
		// Not run, and no other target would take it either.
		return errorReply(err)
	}
	switch m.Pattern {
	case introspect.CatalogPattern:
		return n.catalogReply(m)
	case introspect.HealthPattern:
		return n.healthReply()
	case introspect.DescribePattern:
		return n.describeReply(m)
	}
	e, event, err := n.servedEvent(m)
	if !event && err == nil {
		e, err = n.wireHandler(m.Pattern)
	}
	if err != nil {
		return errorReply(err)
	}
	if e == nil && event {
		// Not run: another member of the group may hold the subscription.
		return refusedReply(Errorf(CodeNotFound, "wizard: the remote node has no subscription for the event %s", quoteClipped(m.Pattern, maxEcho)))
	}
	if e == nil {
		// Only local handlers serve remote calls: a node never forwards.
		return refusedReply(Errorf(CodeNotFound, "wizard: the remote node has no handler for %s", quoteClipped(m.Pattern, maxEcho)))
	}
	var over *cachedPattern
	if o := metaValue(m.Meta, metaOver); o != "" {
		if over, err = n.wireTarget(o); err != nil {
			return errorReply(err)
		}
		if err := overlaid(m, over); err != nil {
			return errorReply(err)
		}
	}
	if id := metaValue(m.Meta, metaCall); n.dedup != nil && len(id) == 8 && m.Flags&FlagNoReply == 0 {
		// The call may come again. Its copies are known by the caller's
		// token for this node and the identity the transport verified,
		// never by metadata another caller could copy: a call without a
		// token runs as a new call.
		if k, ok := newCallerKey(m.Identity, metaValue(m.Meta, metaToken)); ok {
			return n.serveOnce(ctx, m, e, over, k, binary.BigEndian.Uint64([]byte(id)), true)
		}
	}
	return n.serveLocal(ctx, m, e, over)
}

// serveOnce serves a call that may arrive again (refed after its
// connection dropped): a copy joins the running call or gets the stored
// answer, and the handler runs once. keepFailed keeps a failed answer
// too (a call's copies get it); without it, a copy that comes after a
// failure runs again (an engine's event, redelivered to be retried).
func (n *Node) serveOnce(ctx context.Context, m *Message, e *handlerEntry, over *cachedPattern, k callerKey, id uint64, keepFailed bool) *Message {
	de, seen := n.dedup.begin(k, id, n.dedup.digest(m))
	switch seen {
	case dedupOther:
		// The caller's own id for another call (another pattern or
		// payload): not a copy of the call it names.
		return errorReply(Errorf(CodeAborted, "wizard: call id %d is already taken by another call of this caller", id))
	case dedupGone:
		// It ran; other answers took the room its answer was kept in
		// before its time. Running it again is what the table is for
		// preventing: the caller learns it ran, and no more.
		n.stats.duplicates.Add(1)
		n.observeDuplicate(ctx, m, e)
		return errorReply(ErrAnswerDropped)
	case dedupCopy:
		n.stats.duplicates.Add(1)
		n.observeDuplicate(ctx, m, e)
		reply, err := n.dedup.wait(ctx, de)
		if err != nil {
			return errorReply(err)
		}
		return n.encodedFor(m, reply)
	}
	reply := n.serveLocal(ctx, m, e, over)
	// A refusal did not run the handler: its retry must. The table keeps
	// a copy of the reply's error, payload and metadata, and its body (the
	// handler's result): nothing of the call's memory (see Message.copied).
	// It keeps a payload by reference only when the node encoded it for
	// this answer alone (sharedPayload).
	n.dedup.finish(de, reply, reply.Flags&FlagRefused == 0 && (keepFailed || reply.Code == CodeOK))
	return reply
}

// serveLocal runs a remote call on its local handler e.
func (n *Node) serveLocal(ctx context.Context, m *Message, e *handlerEntry, over *cachedPattern) *Message {
	m.in = raw{codec: m.Codec, data: m.Payload, typ: metaValue(m.Meta, metaType), call: m}
	msg := &m.in // lives in m: boxing it allocates nothing
	cfg := callConfig{noReply: m.Flags&FlagNoReply != 0}
	if want := e.types.in; want != "" && m.Codec == CodecProto && m.in.typ != "" && m.in.typ != want {
		// Refused, not run: another target may take this type.
		err := errWrongRequest(e.pattern.String(), want, m.in.typ)
		if cfg.noReply {
			n.log.Warn("wizard: no-reply call refused", "pattern", m.Pattern, "err", err)
			return nil
		}
		return refusedReply(err)
	}
	if cfg.noReply {
		// A no-reply handler has the caller's budget, within its
		// connection's life. It runs on the transport's goroutine, which
		// answers nothing for it, so that the transport's bound on the
		// handlers it runs per connection holds (a goroutine of its own
		// per call escaped it).
		cfg.timeout, cfg.inline = m.Deadline, true
	}
	hctx := remoteContext(ctx, m)
	res, err := n.dispatch(hctx, e, msg, over, &cfg)
	if cfg.noReply {
		if err != nil {
			n.log.Warn("wizard: no-reply call refused", "pattern", m.Pattern, "err", err)
		}
		return nil
	}
	if err == errOverloaded || err == errClosing {
		return refusedReply(err)
	}
	if err != nil {
		return errorReply(err)
	}
	codec, payload, typ, body, err := encodeReply(m, res.v)
	if err != nil {
		// The reason names Go types: for this node's log, not the caller.
		n.log.Error("wizard: a handler's result cannot be encoded", "pattern", e.pattern.String(), "err", err)
		return errorReply(errUnencodable)
	}
	// The reply takes the request's place, as the Server contract allows:
	// nothing reads the request once its handler has returned, and the
	// call saves an allocation. The metadata reuses the request's room
	// (every call carries at least the caller's id).
	meta := m.Meta[:0]
	if hctx != ctx {
		meta = nil // the handler's IncomingMetadata reads the request's
	}
	// Nothing holds the call once its reply is encoded when the entry's
	// handler is a typed one, unwrapped, which decoded a copy of it
	// (copied), and the handler's context does not carry its metadata.
	free := m.copied && e.unary && hctx == ctx
	*m = Message{Codec: codec, Payload: payload, owned: ownedPayload(res.v), body: body.m, bodyLen: body.n, copied: free}
	if typ != "" {
		m.Meta = append(meta, MetaPair{metaType, typ})
	}
	return m
}

// errorReply is the reply for a failed call: its code, message and
// details (encoded in the payload).
// refusedReply is the reply for a call refused without running a handler.
func refusedReply(err error) *Message {
	r := errorReply(err)
	r.Flags |= FlagRefused
	return r
}

func errorReply(err error) *Message {
	e := toError(err)
	code := e.Code
	if code == CodeOK {
		code = CodeUnknown
	}
	reply := &Message{Code: code, Error: e.Message}
	if len(e.Details) > 0 {
		reply.Payload = appendDetails(nil, e.Details)
	}
	return reply
}

// The refusals of dispatch: the handler did not run. Remote callers learn
// it (FlagRefused) and may go to another target.
var (
	errOverloaded = &Error{Code: CodeResourceExhausted, Message: "wizard: node is over its in-flight limit"}
	errClosing    = errClosed()
)

// errUnencodable answers a call whose handler returned a result that
// cannot be encoded (a channel, a function, a value that fails to marshal).
var errUnencodable = &Error{Code: CodeInternal, Message: "wizard: the handler's result cannot be encoded"}

// dispatch runs e's handler under the node's in-flight accounting.
// over, if not nil, is a pattern whose pairs overlay the map msg.
func (n *Node) dispatch(ctx context.Context, e *handlerEntry, msg any, over *cachedPattern, cfg *callConfig) (Result, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return Result{}, toError(err)
	}
	c := n.inflight.Add(1)
	if n.closed.Load() {
		n.done()
		n.observeRefused(ctx, e, errClosing)
		return Result{}, errClosing
	}
	if n.maxInFlight > 0 && c > n.maxInFlight {
		n.done()
		n.stats.shed.Add(1)
		n.observeRefused(ctx, e, errOverloaded)
		return Result{}, errOverloaded
	}
	if cfg.noReply {
		req := Request{msg: msg, over: over, entry: e, node: n}
		if cfg.inline {
			// A remote call's: its ctx ends when its connection does
			// (the caller sends no cancel for it), so that work for a
			// caller that left stops, and calls still queued on the
			// connection do not run.
			n.serveNoReply(ctx, cfg.timeout, e, req)
		} else {
			go n.serveNoReply(context.WithoutCancel(ctx), cfg.timeout, e, req)
		}
		return Result{}, nil
	}
	if cfg.timeout > 0 {
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > cfg.timeout {
			return n.serveTimeout(ctx, cfg.timeout, e, Request{msg: msg, over: over, entry: e, node: n})
		}
	}
	return n.serveCounted(ctx, e, Request{msg: msg, over: over, entry: e, node: n})
}

// serveCounted is serve for a call dispatch counted in flight: one
// deferred function both recovers a panic and ends the count (two defers,
// in dispatch and in serve, showed in the in-process call's profile).
func (n *Node) serveCounted(ctx context.Context, e *handlerEntry, req Request) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = Result{}, n.panicked(e, p)
		}
		n.done()
	}()
	v, err := e.h(ctx, req)
	if err != nil {
		if ce, ok := err.(*Error); ok && ce == nil {
			return Result{v: v}, nil // a nil *Error returned as an error: no error
		}
		return Result{}, toError(err)
	}
	return Result{v: v}, nil
}

func (n *Node) serveTimeout(ctx context.Context, d time.Duration, e *handlerEntry, req Request) (Result, error) {
	defer n.done()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	v, err := n.serve(ctx, e, req)
	return Result{v: v}, err
}

func (n *Node) serveNoReply(ctx context.Context, timeout time.Duration, e *handlerEntry, req Request) {
	defer n.done()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if _, err := n.serve(ctx, e, req); err != nil {
		n.log.Warn("wizard: no-reply handler failed", "pattern", e.pattern.String(), "err", err)
	}
}

func (n *Node) done() {
	if n.inflight.Add(-1) == 0 && n.closed.Load() {
		n.drainOnce.Do(func() { close(n.drained) })
	}
}

// serve runs a handler, turning a panic into a CodeInternal error.
func (n *Node) serve(ctx context.Context, e *handlerEntry, req Request) (res any, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, n.panicked(e, p)
		}
	}()
	res, err = e.h(ctx, req)
	if err != nil {
		if ce, ok := err.(*Error); ok && ce == nil {
			return res, nil // a nil *Error returned as an error: no error
		}
		return nil, toError(err)
	}
	return res, nil
}

// panicked logs the panic p of e's handler, with the stack, and returns
// the caller's error.
func (n *Node) panicked(e *handlerEntry, p any) error {
	n.log.Error("wizard: handler panicked", "pattern", e.pattern.String(), "panic", p, "stack", stackTrace(debug.Stack()))
	return Errorf(CodeInternal, "wizard: handler for %q panicked", e.pattern.String())
}

// overlaid checks the protobuf payload of a call that over overlays (an Act
// with a protobuf message) as Act does: none of its fields contradicts
// over. A JSON payload is overlaid as a map is.
func overlaid(m *Message, over *cachedPattern) error {
	if m.Codec != CodecProto {
		return nil
	}
	r := raw{codec: m.Codec, data: m.Payload, typ: metaValue(m.Meta, metaType)}
	pm, err := r.message()
	if err != nil {
		return nil // the handler gets the payload as it is, and the error if it decodes it
	}
	return contradicts(pm.ProtoReflect(), over)
}
