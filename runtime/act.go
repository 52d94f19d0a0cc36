package runtime

import (
	"context"

	"github.com/wizardmesh/wizard/runtime/internal/patrun"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// Act calls the handler that best matches msg overlaid with the pattern's
// pairs (the pattern wins on a shared key); every routed root key of the
// result takes part in matching, as in Seneca. msg is a map[string]any, JSON
// object bytes, a protobuf message or nil. A map or JSON handler receives the
// merged map; a protobuf message reaches the handler as is, and one with a
// field the pattern gives another value is refused ([CodeInvalidArgument]):
// what the handler reads with [Request.Get] and what it decodes agree.
func (n *Node) Act(ctx context.Context, pattern string, msg any, opts ...CallOption) (Result, error) {
	cfg := configOf(opts)
	t, err := n.parsed.get(pattern)
	if err != nil {
		return Result{}, err
	}
	var buf [16]patrun.Pair
	pairs, body, over, err := actMessage(buf[:0], t, msg)
	if err != nil {
		return Result{}, err
	}
	return n.actPairs(ctx, pairs, body, over, cfg)
}

// ActE calls the handler that matches pattern, plus the [Mixin] fields of
// data, and hands it data alone. data is any value the handler can decode:
// usually a protobuf message, a map or JSON bytes. Pattern strings are
// parsed once and cached; this is the fast path.
func (n *Node) ActE(ctx context.Context, pattern string, data any, opts ...CallOption) (Result, error) {
	cfg := configOf(opts)
	t, err := n.parsed.get(pattern)
	if err != nil {
		return Result{}, err
	}
	return n.actE(ctx, t, data, cfg)
}

// The configurations of calls without options and with one flag; shared,
// so never written.
var (
	noOptions      callConfig
	idempotentOnly = callConfig{idempotent: true}
	noReplyOnly    = callConfig{noReply: true}
)

// configOf applies opts; without options, or with Idempotent, NoReply or
// Default alone, it allocates nothing.
func configOf(opts []CallOption) *callConfig {
	if len(opts) == 0 {
		return &noOptions
	}
	if len(opts) == 1 {
		// A lone option that sets a flag has a shared configuration.
		switch o := opts[0].(type) {
		case idempotentOption:
			return &idempotentOnly
		case noReplyOption:
			return &noReplyOnly
		case defaultOption:
			return o.alone
		}
	}
	cfg := new(callConfig)
	for _, o := range opts {
		if o != nil {
			o.applyCall(cfg)
		}
	}
	return cfg
}

func (n *Node) actE(ctx context.Context, t *cachedPattern, data any, cfg *callConfig) (Result, error) {
	if len(cfg.mixin) > 0 {
		var buf [16]pattern.Pair
		pairs, err := mixinPairs(buf[:0], t.pattern, data, cfg.mixin)
		if err != nil {
			return Result{}, err
		}
		return n.actPairs(ctx, pairs, data, nil, cfg)
	}
	if n.invoker != nil {
		return n.intercepted(ctx, t.pattern, data, nil, cfg)
	}
	return n.callRoute(ctx, n.resolve(t), patrun.PairsOf(t.pattern), data, nil, cfg)
}

// actPairs calls the route that pairs (sorted, as a message routes) find,
// through the call interceptors if the node has any. over, if not nil,
// overlays a map msg.
func (n *Node) actPairs(ctx context.Context, pairs []pattern.Pair, msg any, over *cachedPattern, cfg *callConfig) (Result, error) {
	if n.invoker != nil {
		if m, ok := msg.(map[string]any); ok && over != nil {
			msg, over = merged(m, over), nil
		}
		return n.intercepted(ctx, patrun.New(clonePairs(pairs)), msg, over, cfg)
	}
	return n.callRoute(ctx, n.find(pairs), pairs, msg, over, cfg)
}

// mixinPairs appends p's pairs and data's fields named by keys to dst,
// sorted; p wins on a shared key.
func mixinPairs(dst []pattern.Pair, p pattern.Pattern, data any, keys []string) ([]pattern.Pair, error) {
	dst = append(dst, patrun.PairsOf(p)...)
	for _, k := range keys {
		if _, dup := patrun.LookupPair(dst, k); dup || patrun.IsMetaKey(k) {
			continue
		}
		v, ok, err := fieldValue(data, k)
		if err != nil {
			return dst, err
		}
		if ok {
			dst = append(dst, pattern.Pair{Key: k, Value: v})
			patrun.SortPairs(dst)
		}
	}
	return dst, nil
}

func clonePairs(ps []pattern.Pair) []pattern.Pair { return append([]pattern.Pair(nil), ps...) }

// intercepted runs a call through the call interceptors.
func (n *Node) intercepted(ctx context.Context, p pattern.Pattern, msg any, over *cachedPattern, cfg *callConfig) (Result, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	// The call and its own copy of the options in one allocation.
	b := &interceptedCall{own: *cfg}
	b.call = Call{Pattern: p, Msg: msg, NoReply: cfg.noReply, cfg: &b.own, over: over}
	return n.invoker(ctx, &b.call)
}

// interceptedCall is a Call handed to the call interceptors and the
// options it carries.
type interceptedCall struct {
	call Call
	own  callConfig
}

// invokeCall is the innermost Invoker: route and dispatch.
func (n *Node) invokeCall(ctx context.Context, c *Call) (Result, error) {
	if c.cfg != nil && (c.cfg.eventRoute != nil || c.cfg.eventLocal != nil) {
		cfg := *c.cfg
		cfg.noReply = c.NoReply
		return Result{}, n.deliverEvent(ctx, &cfg, c.Msg, c.over)
	}
	if c.cfg != nil && c.cfg.noReply == c.NoReply {
		// The call's own copy (intercepted), which nothing writes: no other.
		return n.callRoute(ctx, n.findRoute(c.Pattern), patrun.PairsOf(c.Pattern), c.Msg, c.over, c.cfg)
	}
	var cfg callConfig
	if c.cfg != nil {
		cfg = *c.cfg
	}
	cfg.noReply = c.NoReply
	return n.callRoute(ctx, n.findRoute(c.Pattern), patrun.PairsOf(c.Pattern), c.Msg, c.over, &cfg)
}

// find returns the route that pairs (sorted) find, or nil.
func (n *Node) find(pairs []pattern.Pair) *route {
	r, _ := patrun.FindPairs(n.router, pairs)
	return r
}

// findRoute returns the route that best matches a message whose routed
// pairs are exactly p's, or nil.
func (n *Node) findRoute(p pattern.Pattern) *route {
	r, _ := patrun.FindPattern(n.router, p)
	return r
}

// exactRoute returns the route added for exactly p, or nil.
func (n *Node) exactRoute(p pattern.Pattern) *route {
	r, _ := patrun.Exact(n.router, p)
	return r
}

// callArgs is a call that leaves the in-process path: the route its
// routed pairs found, and what it carries to a peer. The steps of a remote
// call (callRemote, outgoing) and of a call that waits for a ready target
// (callReady) take it whole.
type callArgs struct {
	r     *route         // the route pairs found; nil when none
	pairs []pattern.Pair // the call's routed pairs, sorted
	msg   any            // the message, as the caller gave it
	over  *cachedPattern // the pattern that overlays a map msg (Act), or nil
	cfg   *callConfig    // the call's options
}

// callRoute runs a call on r, the route that pairs found: on its local
// handler if it has one, else on a peer; a nil r is not found (or the
// call's [Default]). Every call goes through it. Its arguments are the
// fields of a [callArgs], passed one by one: an in-process call, the
// common case, never builds one.
func (n *Node) callRoute(ctx context.Context, r *route, pairs []pattern.Pair, msg any, over *cachedPattern, cfg *callConfig) (Result, error) {
	if cfg.waitForReady && cfg.ready == nil {
		return n.callReady(ctx, &callArgs{r, pairs, msg, over, cfg})
	}
	if r == nil {
		return n.notFound(string(patrun.AppendCanonical(nil, pairs)), cfg)
	}
	if e := r.local.Load(); e != nil {
		if metadataUsed.Load() { // else no ctx carries metadata: nothing to look up
			hctx, err := inProcessContext(ctx)
			if err != nil {
				return Result{}, err
			}
			ctx = hctx
		}
		return n.dispatch(ctx, e, msg, over, cfg)
	}
	return n.callRemote(ctx, &callArgs{r, pairs, msg, over, cfg})
}

func (n *Node) notFound(pattern string, cfg *callConfig) (Result, error) {
	if n.closed.Load() {
		return Result{}, errClosed()
	}
	if cfg.hasDefault {
		return Result{v: cfg.def}, nil
	}
	if n.remote != nil {
		if err := n.unreachableError(pattern, cfg.waitForReady); err != nil {
			cfg.ready.unavailable(false)
			return Result{}, err
		}
	}
	return Result{}, &Error{Code: CodeNotFound, Message: "wizard: no handler matches " + quoteClipped(pattern, maxEcho), cause: ErrNoHandler}
}

func errClosed() *Error {
	return &Error{Code: CodeUnavailable, Message: ErrClosed.Error(), cause: ErrClosed}
}
