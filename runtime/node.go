package runtime

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Node is a wizard service node: it holds handlers added by pattern ([Node.Add])
// and dispatches calls ([Node.Act], [Node.ActE]) to the best matching one.
// A Node is safe for concurrent use.
type Node struct {
	id       string
	instance string // this run of the node: random, new on every start
	log      *slog.Logger
	router   *Router[*route]
	gen      atomic.Uint64 // bumped on every routing change; invalidates cached resolutions

	maxInFlight int64
	inflight    atomic.Int64
	closed      atomic.Bool
	drained     chan struct{}
	drainOnce   sync.Once

	handlerICs []HandlerInterceptor
	invoker    Invoker // the call interceptor chain, nil without interceptors

	targets targetCache

	routeMu       sync.Mutex    // serialises route changes: local adds and removes, peer catalogs
	changed       chan struct{} // closed and replaced on every routing change; guarded by routeMu
	remote        *remote       // nil without a transport
	dedup         *dedupTable   // nil without a listener or with WithDedup(0, _)
	callSeq       atomic.Uint64 // ids of the remote calls this node makes
	stats         stats
	listenerStop  sync.Once
	listenerErr   error
	peersStop     sync.Once
	discoveryStop sync.Once
	discoveryErr  error
	peersErr      error
}

// New returns a node configured by opts. Without [WithTransport] a node
// dispatches in-process only; with one it also serves its handlers
// ([WithListen]) and calls the nodes [WithDiscovery] finds.
func New(opts ...Option) (*Node, error) {
	var c nodeConfig
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("wizard: nil option")
		}
		o.applyNode(&c)
	}
	if c.maxInFlight < 0 {
		return nil, fmt.Errorf("wizard: WithMaxInFlight(%d): the limit cannot be negative", c.maxInFlight)
	}
	for _, ic := range c.handlerICs {
		if ic == nil {
			return nil, fmt.Errorf("wizard: nil handler interceptor")
		}
	}
	for _, ic := range c.callICs {
		if ic == nil {
			return nil, fmt.Errorf("wizard: nil call interceptor")
		}
	}
	if c.id == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		c.id = hex.EncodeToString(b[:])
	}
	var boot [8]byte
	_, _ = rand.Read(boot[:])
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	n := &Node{
		id:          c.id,
		instance:    hex.EncodeToString(boot[:]),
		log:         c.logger,
		router:      NewRouter[*route](),
		maxInFlight: int64(c.maxInFlight),
		drained:     make(chan struct{}),
		handlerICs:  c.handlerICs,
		changed:     make(chan struct{}),
	}
	// Call ids start at a random point: a caller that restarts under the
	// same id must not reuse the ids of its earlier run, whose answers the
	// nodes it called may still keep for de-duplication. Two runs' ids
	// meet only if their ranges overlap within a table's window: with
	// 2^64 starting points, never in practice.
	var seq [8]byte
	_, _ = rand.Read(seq[:])
	n.callSeq.Store(binary.LittleEndian.Uint64(seq[:]))
	if len(c.callICs) > 0 {
		inv := n.invokeCall
		for i := len(c.callICs) - 1; i >= 0; i-- {
			inv = c.callICs[i](inv)
		}
		n.invoker = inv
	}
	if c.transport == nil {
		if c.listen != "" || c.discovery != nil {
			return nil, fmt.Errorf("wizard: WithListen and WithDiscovery need WithTransport")
		}
		return n, nil
	}
	if c.defaultTimeout < 0 || c.refresh < 0 || c.dedupSize < 0 || c.dedupTTL < 0 {
		return nil, fmt.Errorf("wizard: negative timeout, refresh interval or de-duplication bound")
	}
	if !c.dedupSet {
		c.dedupSize, c.dedupTTL = 16384, 30*time.Second
	}
	if c.listen != "" && c.dedupSize > 0 {
		n.dedup = newDedupTable(c.dedupSize, cmp.Or(c.dedupTTL, 30*time.Second))
	}
	n.remote = &remote{
		transport:      c.transport,
		listenAddr:     c.listen,
		discovery:      c.discovery,
		defaultTimeout: cmp.Or(c.defaultTimeout, 5*time.Second),
		refresh:        cmp.Or(c.refresh, 2*time.Second),
		peers:          map[string]*peer{},
		newBalancer:    c.newBalancer,
		newBreaker:     c.newBreaker,
		budget:         newRetryBudget(),
		catalogs:       map[string][]Pattern{},
	}
	if err := n.startRemote(); err != nil {
		return nil, err
	}
	return n, nil
}

// ID returns the node's id.
func (n *Node) ID() string { return n.id }

// Add adds a handler for pattern. Adding a pattern identical to one already
// added is an error unless opts include [Override].
func (n *Node) Add(pattern string, h Handler, opts ...HandlerOption) error {
	p, err := ParsePattern(pattern)
	if err != nil {
		return err
	}
	return n.AddPattern(p, h, opts...)
}

// AddPattern is [Node.Add] with a parsed pattern.
func (n *Node) AddPattern(p Pattern, h Handler, opts ...HandlerOption) error {
	if h == nil {
		return Errorf(CodeInvalidArgument, "wizard: nil handler for pattern %q", p.String())
	}
	if n.closed.Load() {
		return &Error{Code: CodeUnavailable, Message: ErrClosed.Error(), cause: ErrClosed}
	}
	var c handlerConfig
	for _, o := range opts {
		if o != nil {
			o.applyHandler(&c)
		}
	}
	for i := len(n.handlerICs) - 1; i >= 0; i-- {
		h = n.handlerICs[i](h)
	}
	n.routeMu.Lock()
	defer n.routeMu.Unlock()
	entry := &handlerEntry{pattern: p, h: h}
	if re := n.router.exactEntry(p); re != nil {
		r := re.value
		entry.prior = r.local.Load()
		if entry.prior != nil && !c.override {
			return Errorf(CodeAlreadyExists, "wizard: pattern %q is already added; use runtime.Override() to replace it", p.String())
		}
		// Replace in the route, never in the router: callers use the route
		// after the router's lock is released.
		r.local.Store(entry)
	} else {
		r := &route{pattern: p}
		r.local.Store(entry)   // complete before any caller can see it
		_ = n.router.Add(p, r) // cannot fail: p is absent and routeMu is held
	}
	n.routingChanged()
	n.localChanged()
	return nil
}

// Remove removes the handler for pattern (and its priors) and reports
// whether there was one.
func (n *Node) Remove(pattern string) (bool, error) {
	p, err := ParsePattern(pattern)
	if err != nil {
		return false, err
	}
	n.routeMu.Lock()
	defer n.routeMu.Unlock()
	re := n.router.exactEntry(p)
	if re == nil || re.value.local.Load() == nil {
		return false, nil
	}
	if ps := re.value.peers.Load(); ps != nil && len(*ps) > 0 {
		re.value.local.Store(nil) // remote peers still serve it
	} else {
		n.router.Remove(p)
	}
	n.routingChanged()
	n.localChanged()
	return true, nil
}

// routingChanged invalidates cached resolutions and wakes WaitFor.
// Callers hold routeMu.
func (n *Node) routingChanged() {
	n.gen.Add(1)
	close(n.changed)
	n.changed = make(chan struct{})
}

// WaitFor blocks until a call to pattern would find a handler, local or
// remote, or until ctx is done. Use it to wait for a service to join.
func (n *Node) WaitFor(ctx context.Context, pattern string) error {
	t, err := n.targets.get(pattern)
	if err != nil {
		return err
	}
	for {
		n.routeMu.Lock()
		ch := n.changed
		n.routeMu.Unlock()
		if r := n.resolve(t); r != nil && (r.local.Load() != nil || r.hasPeers()) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return toError(ctx.Err())
		}
	}
}

// Act calls the handler that best matches msg overlaid with the pattern's
// pairs (the pattern wins on a shared key); every routed root key of the
// result takes part in matching, as in Seneca. msg is a map[string]any, JSON
// object bytes, a protobuf message or nil. A map or JSON handler receives the
// merged map; a protobuf message reaches the handler as is.
func (n *Node) Act(ctx context.Context, pattern string, msg any, opts ...CallOption) (Result, error) {
	cfg := callOptions(opts)
	t, err := n.targets.get(pattern)
	if err != nil {
		return Result{}, err
	}
	var buf [16]Pair
	pairs, body, over, err := actMessage(buf[:0], t, msg)
	if err != nil {
		return Result{}, err
	}
	if n.invoker != nil {
		if m, ok := body.(map[string]any); ok && over != nil {
			body, over = merged(m, over), nil
		}
		return n.intercepted(ctx, newPattern(clonePairs(pairs)), body, over, cfg)
	}
	var r *route
	if re := n.router.find(pairs, false); re != nil {
		r = re.value
	}
	if r == nil {
		return n.notFound(string(appendCanonical(nil, pairs)), cfg)
	}
	return n.call(ctx, r, body, over, cfg)
}

// ActE calls the handler that matches pattern, plus the [Mixin] fields of
// data, and hands it data alone. data is any value the handler can decode:
// usually a protobuf message, a map or JSON bytes. Pattern strings are
// parsed once and cached; this is the fast path.
func (n *Node) ActE(ctx context.Context, pattern string, data any, opts ...CallOption) (Result, error) {
	cfg := callOptions(opts)
	t, err := n.targets.get(pattern)
	if err != nil {
		return Result{}, err
	}
	return n.actE(ctx, t, data, cfg)
}

// noOptions is the configuration of a call without options; never written.
// The configurations of calls without options and with one flag; shared,
// so never written.
var (
	noOptions      callConfig
	idempotentOnly = callConfig{idempotent: true}
	noReplyOnly    = callConfig{noReply: true}
)

// callOptions applies opts; without options, or with Idempotent or NoReply
// alone, it allocates nothing.
func callOptions(opts []CallOption) *callConfig {
	if len(opts) == 0 {
		return &noOptions
	}
	if len(opts) == 1 {
		// A lone option that sets a flag has a shared configuration.
		switch opts[0].(type) {
		case idempotentOption:
			return &idempotentOnly
		case noReplyOption:
			return &noReplyOnly
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

func (n *Node) actE(ctx context.Context, t *target, data any, cfg *callConfig) (Result, error) {
	if len(cfg.mixin) > 0 {
		var buf [16]Pair
		pairs, err := mixinPairs(buf[:0], t.pattern, data, cfg.mixin)
		if err != nil {
			return Result{}, err
		}
		if n.invoker != nil {
			return n.intercepted(ctx, newPattern(clonePairs(pairs)), data, nil, cfg)
		}
		var r *route
		if re := n.router.find(pairs, false); re != nil {
			r = re.value
		}
		if r == nil {
			return n.notFound(string(appendCanonical(nil, pairs)), cfg)
		}
		return n.call(ctx, r, data, nil, cfg)
	}
	if n.invoker != nil {
		return n.intercepted(ctx, t.pattern, data, nil, cfg)
	}
	r := n.resolve(t)
	if r == nil {
		return n.notFound(t.pattern.String(), cfg)
	}
	return n.call(ctx, r, data, nil, cfg)
}

// mixinPairs appends p's pairs and data's fields named by keys to dst,
// sorted; p wins on a shared key.
func mixinPairs(dst []Pair, p Pattern, data any, keys []string) ([]Pair, error) {
	dst = append(dst, p.pairs()...)
	for _, k := range keys {
		if _, dup := lookupPair(dst, k); dup || isMetaKey(k) {
			continue
		}
		v, ok, err := fieldValue(data, k)
		if err != nil {
			return dst, err
		}
		if ok {
			dst = append(dst, Pair{k, v})
			sortPairs(dst)
		}
	}
	return dst, nil
}

func clonePairs(ps []Pair) []Pair { return append([]Pair(nil), ps...) }

// intercepted runs a call through the call interceptors.
func (n *Node) intercepted(ctx context.Context, p Pattern, msg any, over *target, cfg *callConfig) (Result, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	own := *cfg
	return n.invoker(ctx, &Call{Pattern: p, Msg: msg, NoReply: cfg.noReply, cfg: &own, over: over})
}

// invokeCall is the innermost Invoker: route and dispatch.
func (n *Node) invokeCall(ctx context.Context, c *Call) (Result, error) {
	var cfg callConfig
	if c.cfg != nil {
		cfg = *c.cfg
	}
	cfg.noReply = c.NoReply
	var r *route
	if re := n.router.findPattern(c.Pattern); re != nil {
		r = re.value
	}
	if r == nil {
		return n.notFound(c.Pattern.String(), &cfg)
	}
	return n.call(ctx, r, c.Msg, c.over, &cfg)
}

// resolve finds t's route, cached until the routing changes.
func (n *Node) resolve(t *target) *route {
	g := n.gen.Load()
	if res := t.res.Load(); res != nil && res.gen == g {
		return res.route
	}
	var r *route
	if re := n.router.findPattern(t.pattern); re != nil {
		r = re.value
	}
	t.res.Store(&resolution{gen: g, route: r})
	return r
}

// call runs a call on the route the router chose.
func (n *Node) call(ctx context.Context, r *route, msg any, over *target, cfg *callConfig) (Result, error) {
	e := r.local.Load()
	if e == nil {
		return n.callRemote(ctx, r, msg, over, cfg)
	}
	return n.dispatch(ctx, e, msg, over, cfg)
}

func (n *Node) notFound(pattern string, cfg *callConfig) (Result, error) {
	if n.closed.Load() {
		return Result{}, errClosed()
	}
	if cfg.hasDefault {
		return Result{v: cfg.def}, nil
	}
	return Result{}, Errorf(CodeNotFound, "wizard: no handler matches %q", pattern)
}

func errClosed() *Error {
	return &Error{Code: CodeUnavailable, Message: ErrClosed.Error(), cause: ErrClosed}
}

// The refusals of dispatch: the handler did not run. Remote callers learn
// it (FlagRefused) and may go to another target.
var (
	errOverloaded = &Error{Code: CodeResourceExhausted, Message: "wizard: node is over its in-flight limit"}
	errClosing    = errClosed()
)

// dispatch runs e's handler under the node's in-flight accounting.
// over, if not nil, is a pattern whose pairs overlay the map msg.
func (n *Node) dispatch(ctx context.Context, e *handlerEntry, msg any, over *target, cfg *callConfig) (Result, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return Result{}, toError(err)
	}
	c := n.inflight.Add(1)
	if n.closed.Load() {
		n.done()
		return Result{}, errClosing
	}
	if n.maxInFlight > 0 && c > n.maxInFlight {
		n.done()
		n.stats.shed.Add(1)
		return Result{}, errOverloaded
	}
	if cfg.noReply {
		go n.serveNoReply(context.WithoutCancel(ctx), cfg.timeout, e, Request{msg: msg, over: over, entry: e, node: n})
		return Result{}, nil
	}
	defer n.done()
	if cfg.timeout > 0 {
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > cfg.timeout {
			return n.serveTimeout(ctx, cfg.timeout, e, Request{msg: msg, over: over, entry: e, node: n})
		}
	}
	v, err := n.serve(ctx, e, Request{msg: msg, over: over, entry: e, node: n})
	return Result{v: v}, err
}

func (n *Node) serveTimeout(ctx context.Context, d time.Duration, e *handlerEntry, req Request) (Result, error) {
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
			n.log.Error("wizard: handler panicked", "pattern", e.pattern.String(), "panic", p, "stack", string(debug.Stack()))
			res, err = nil, Errorf(CodeInternal, "wizard: handler for %q panicked", e.pattern.String())
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

// Close stops the node: new calls fail with [ErrClosed] and Close waits for
// running handlers to finish. It is idempotent.
func (n *Node) Close() error {
	return n.Shutdown(context.Background())
}

// Shutdown stops the node like [Node.Close] but waits for running handlers
// only until ctx is done, then returns ctx's error.
func (n *Node) Shutdown(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	// Leave the mesh first, so that peers stop routing here before they
	// see connections close. Then remote callers: stop accepting, send
	// goaway, let their calls finish. Then local calls drain, while the
	// peers they may call are still connected. Then the peers go.
	if n.remote != nil {
		n.discoveryStop.Do(func() {
			if d := n.remote.discovery; d != nil {
				n.discoveryErr = d.Close()
			}
		})
		n.listenerStop.Do(func() { n.listenerErr = n.stopListener(ctx) })
	}
	n.closed.Store(true)
	if n.inflight.Load() == 0 {
		n.drainOnce.Do(func() { close(n.drained) })
	}
	var err error
	select {
	case <-n.drained: // drained wins over a done ctx
	default:
		select {
		case <-n.drained:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if n.remote != nil {
		n.peersStop.Do(func() { n.peersErr = n.stopPeers() })
		if err == nil {
			err = errors.Join(n.discoveryErr, n.listenerErr, n.peersErr)
		}
	}
	return err
}

// target is a parsed pattern with its cached resolution.
type target struct {
	pattern Pattern
	values  []any // the pattern's values, boxed once for Act's merged maps
	res     atomic.Pointer[resolution]
}

func newTarget(p Pattern) *target {
	t := &target{pattern: p}
	for _, pr := range p.pairs() {
		t.values = append(t.values, pr.Value)
	}
	return t
}

type resolution struct {
	gen   uint64
	route *route
}

// targetCache caches parsed pattern strings, bounded: when it holds
// maxTargets entries it starts over.
type targetCache struct {
	m sync.Map // string -> *target
	n atomic.Int64
}

const maxTargets = 4096

func (c *targetCache) get(s string) (*target, error) {
	if v, ok := c.m.Load(s); ok {
		return v.(*target), nil
	}
	p, err := ParsePattern(s)
	if err != nil {
		return nil, err
	}
	if c.n.Add(1) > maxTargets {
		c.m.Clear()
		c.n.Store(1)
	}
	v, _ := c.m.LoadOrStore(s, newTarget(p))
	return v.(*target), nil
}
