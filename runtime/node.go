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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/patrun"
	"github.com/wizardmesh/wizard/runtime/internal/ratelog"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// Node is a wizard service node: it holds handlers added by pattern ([Node.Add])
// and dispatches calls ([Node.Act], [Node.ActE]) to the best matching one.
// A Node is safe for concurrent use.
type Node struct {
	id       string
	instance string    // this run of the node: random, new on every start
	service  string    // WithService: the group of its subscriptions by default
	streams  streamSet // the streams it serves, ended when a shutdown's grace ends
	events   eventSet  // its subscriptions and its peers'
	log      *slog.Logger
	logLimit *ratelog.Handler // in front of log's handler; closed when the node stops
	router   *pattern.Router[*route]
	gen      atomic.Uint64 // bumped on every routing change; invalidates cached resolutions

	maxInFlight int64
	inflight    atomic.Int64
	closed      atomic.Bool
	health      atomic.Uint32 // a Health: serving once New returns, draining from Shutdown's start
	drained     chan struct{}
	drainOnce   sync.Once

	handlerICs []HandlerInterceptor
	invoker    Invoker // the call interceptor chain, nil without interceptors

	parsed patternCache // pattern strings parsed once: the node's own calls
	wire   patternCache // and those of calls from other nodes, apart
	limits limits       // on what other nodes send
	// peerTypes are the message types learnt from peers (WithPeerTypes),
	// nil without the option.
	peerTypes *peerTypes

	routeMu       sync.Mutex    // serialises route changes: local adds and removes, peer catalogs
	changed       chan struct{} // closed and replaced on every routing change; guarded by routeMu
	remote        *remote       // nil without a transport
	dedup         *dedupTable   // nil without a listener or with WithDedup(0, _)
	callSeq       atomic.Uint64 // ids of the remote calls this node makes
	stats         stats
	obs           observing // WithObserver
	listenerStop  sync.Once
	listenerErr   error
	peersStop     sync.Once
	discoveryStop sync.Once
	discoveryErr  error
	peersErr      error
}

// New returns a node configured by opts. Without [WithTransport] a node
// dispatches in-process only; with one it also serves its handlers
// ([WithListen]) and calls the nodes [WithDiscovery] finds. A nil or
// out-of-range option is an error.
func New(opts ...Option) (*Node, error) {
	var c nodeConfig
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("wizard: New: option %d of %d is nil", i+1, len(opts))
		}
		o.applyNode(&c)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	n := &Node{
		id:          cmp.Or(c.id, randomHex()),
		service:     cmp.Or(c.service, defaultService()),
		instance:    randomHex(),
		router:      pattern.NewRouter[*route](),
		maxInFlight: int64(cmp.Or(c.maxInFlight, defaultMaxInFlight())),
		drained:     make(chan struct{}),
		handlerICs:  c.handlerICs,
		changed:     make(chan struct{}),
		limits:      newLimits(&c),
		peerTypes:   newPeerTypes(c.peerTypes),
	}
	// Call ids start at a random point: a caller that restarts under the
	// same id must not reuse the ids of its earlier run, whose answers the
	// nodes it called may still keep for de-duplication. Two runs' ids
	// meet only if their ranges overlap within a table's window: with
	// 2^64 starting points, never in practice.
	n.log, n.logLimit = newLogger(c.logger)
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
	n.observe(c.observer)
	if c.transport == nil {
		n.health.Store(uint32(HealthServing))
		return n, nil
	}
	if c.listen != "" && !c.noDedup {
		n.dedup = newDedupTable(c.dedupSize, cmp.Or(c.dedupTTL, 30*time.Second))
		n.dedup.maxBytes = cmp.Or(c.dedupBytes, dedupMaxBytes)
	}
	n.remote = newRemote(&c)
	if err := n.startRemote(); err != nil {
		n.unobserve()
		return nil, err
	}
	n.health.Store(uint32(HealthServing))
	return n, nil
}

// validate reports the first option of c out of range.
func (c *nodeConfig) validate() error {
	switch {
	case c.service != "" && checkGroup(c.service) != nil:
		return fmt.Errorf("wizard: WithService(%q): %v", c.service, strings.Replace(checkGroup(c.service).Error(), "group", "name", 1))
	case c.maxInFlight < 0:
		return fmt.Errorf("wizard: WithMaxInFlight(%d): the limit cannot be negative", c.maxInFlight)
	case slices.ContainsFunc(c.handlerICs, func(ic HandlerInterceptor) bool { return ic == nil }):
		return fmt.Errorf("wizard: WithHandlerInterceptors: nil handler interceptor")
	case slices.ContainsFunc(c.callICs, func(ic CallInterceptor) bool { return ic == nil }):
		return fmt.Errorf("wizard: WithCallInterceptors: nil call interceptor")
	case c.transport == nil && (c.listen != "" || c.discovery != nil):
		return fmt.Errorf("wizard: WithListen and WithDiscovery need WithTransport")
	case c.defaultTimeout < 0:
		return fmt.Errorf("wizard: WithDefaultTimeout(%v): the timeout cannot be negative", c.defaultTimeout)
	case c.refresh < 0:
		return fmt.Errorf("wizard: WithCatalogRefresh(%v): the interval cannot be negative", c.refresh)
	case c.maxDials < 0:
		return fmt.Errorf("wizard: WithMaxDials(%d): the limit cannot be negative", c.maxDials)
	case c.dedupBytes < 0:
		return fmt.Errorf("wizard: WithDedupBytes(%d): the bound cannot be negative", c.dedupBytes)
	case c.dedupSize < 0 || c.dedupTTL < 0:
		return fmt.Errorf("wizard: WithDedup(%d, %v): the size and the time cannot be negative", c.dedupSize, c.dedupTTL)
	case c.maxPatternBytes < 0 || c.maxPatternKeys < 0:
		return fmt.Errorf("wizard: WithMaxPatternSize(%d, %d): the limits cannot be negative", c.maxPatternBytes, c.maxPatternKeys)
	case c.maxMetaValue < 0 || c.maxMetaTotal < 0:
		return fmt.Errorf("wizard: WithMaxMetadataSize(%d, %d): the limits cannot be negative", c.maxMetaValue, c.maxMetaTotal)
	}
	return nil
}

// randomHex returns 8 random bytes in hex: node ids and instances.
func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ID returns the node's id.
func (n *Node) ID() string { return n.id }

// Add adds a handler for pattern. Adding a pattern identical to one already
// added is an error unless opts include [Override].
func (n *Node) Add(pattern string, h Handler, opts ...HandlerOption) error {
	p, err := patrun.Parse(pattern)
	if err != nil {
		return err
	}
	return n.addPattern(p, h, opts...)
}

// addPattern is [Node.Add] with a parsed pattern.
func (n *Node) addPattern(p pattern.Pattern, h Handler, opts ...HandlerOption) error {
	if h == nil {
		return Errorf(CodeInvalidArgument, "wizard: nil handler for pattern %q", p.String())
	}
	if v, ok := p.Get("sys"); ok && v == "wizard" {
		return Errorf(CodeInvalidArgument, "wizard: pattern %q is reserved: sys:wizard patterns are the node's own (introspect.CatalogPattern, introspect.HealthPattern)", p.String())
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
	unary := isUnary(h) && len(n.handlerICs) == 0
	stream := isStreamHandler(h)
	for i := len(n.handlerICs) - 1; i >= 0; i-- {
		h = n.handlerICs[i](h)
	}
	n.routeMu.Lock()
	defer n.routeMu.Unlock()
	entry := &handlerEntry{pattern: p, h: h, unary: unary, stream: stream, spec: c.spec, types: c.spec.types()}
	if re := n.exactRoute(p); re != nil {
		r := re
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
	if n.Addr() != "" && n.limits.over(p) {
		n.log.Warn("wizard: the pattern is over the limits of patterns from other nodes (WithMaxPatternSize): other nodes cannot call its handler",
			"pattern", quoteClipped(p.String(), maxEcho), "bytes", len(p.String()), "keys", p.Len(),
			"limit_bytes", n.limits.patternBytes, "limit_keys", n.limits.patternKeys)
	}
	return nil
}

// Remove removes the handler for pattern (and its priors) and reports
// whether there was one.
func (n *Node) Remove(pattern string) (bool, error) {
	p, err := patrun.Parse(pattern)
	if err != nil {
		return false, err
	}
	n.routeMu.Lock()
	defer n.routeMu.Unlock()
	re := n.exactRoute(p)
	if re == nil || re.local.Load() == nil {
		return false, nil
	}
	if ps := re.peers.Load(); ps != nil && len(*ps) > 0 {
		re.local.Store(nil) // remote peers still serve it
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
// When ctx ends first, the error has ctx's code and ctx's error as its
// cause (errors.Is(err, context.DeadlineExceeded)), and names the pattern
// and the peers the node knows: their transport, whether it is connected
// to them, and why the last dial failed.
func (n *Node) WaitFor(ctx context.Context, pattern string) error {
	t, err := n.parsed.get(pattern)
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
			err := ctx.Err()
			return &Error{Code: CodeOf(err), Message: fmt.Sprintf("wizard: WaitFor %s: %v; no handler for it in routing; %s", quoteClipped(t.pattern.String(), maxEcho), err, n.knownPeers()), cause: err}
		}
	}
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
	// Not ready from the first moment: probes see it while the node leaves.
	n.health.CompareAndSwap(uint32(HealthServing), uint32(HealthDraining))
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
	if err == nil {
		err = n.streams.wait(ctx) // streams drain within the same grace
	}
	if err != nil {
		n.streams.cancelAll(errStreamsShutdown) // the grace has ended: they end now, with a code
	}
	if n.remote != nil {
		n.peersStop.Do(func() { n.peersErr = n.stopPeers() })
		if err == nil {
			err = errors.Join(n.discoveryErr, n.listenerErr, n.peersErr)
		}
	}
	n.health.Store(uint32(HealthNotServing))
	n.unobserve()
	if n.dedup != nil {
		n.dedup.stop()
	}
	if err == nil {
		n.logLimit.Close() // the counts of records held back
	}
	return err
}
