package runtime

import (
	"log/slog"
	"slices"
	"time"

	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// Option configures a [Node] in [New].
type Option interface{ applyNode(*nodeConfig) }

// HandlerOption configures a handler in [Node.Add].
type HandlerOption interface{ applyHandler(*handlerConfig) }

// CallOption configures calls: one call ([Node.Act], [Node.ActE],
// [Client.Call]), or every call of a [Client] ([NewClient]). The same
// options serve both; a call's own options apply after its client's.
type CallOption interface{ applyCall(*callConfig) }

type nodeConfig struct {
	transport      Transport
	listen         string
	discovery      discovery.Discovery
	defaultTimeout time.Duration
	refresh        time.Duration
	maxDials       int
	dedupSize      int
	dedupTTL       time.Duration
	dedupBytes     int
	noDedup        bool
	newBalancer    func(pattern.Pattern) Balancer
	newBreaker     func(*Target) Breaker

	maxPatternBytes, maxPatternKeys int
	maxMetaValue, maxMetaTotal      int

	requirePeerIdentity bool // WithRequirePeerIdentity

	id          string
	service     string // WithService
	logger      *slog.Logger
	maxInFlight int
	handlerICs  []HandlerInterceptor
	callICs     []CallInterceptor
	observer    Observer
	peerTypes   bool // WithPeerTypes
}

type handlerConfig struct {
	override bool
	spec     *Spec // Method
}

type callConfig struct {
	noReply    bool
	inline     bool // a no-reply handler runs on the caller's goroutine (a transport's)
	hasDefault bool
	def        any
	mixin      []string
	timeout    time.Duration
	idempotent bool
	key        string
	spec       *Spec // Method

	// event and broadcast make a remote call the delivery of an event to
	// a group's member, or to a node (Broadcast).
	event     string
	broadcast bool
	eventPat  string          // the event's pairs its subscriptions test, canonical: the delivery's Message.Pattern
	eventP    pattern.Pattern // eventPat parsed, for an Observer or the call interceptors (set only with one)
	// eventRoute and eventLocal are where the delivery goes: the route
	// to a group's members (or to a node), or this node's subscriptions.
	eventRoute *route
	eventLocal []*handlerEntry

	waitForReady bool       // WaitForReady
	ready        *readiness // a WaitForReady call's try: what it learnt (see callReady)
}

type nodeOption func(*nodeConfig)

func (f nodeOption) applyNode(c *nodeConfig) { f(c) }

// WithID sets the node's id; by default it is random, unique per boot.
func WithID(id string) Option { return nodeOption(func(c *nodeConfig) { c.id = id }) }

// WithTransport lets the node call and serve other nodes through t
// (runtime/tcp or runtime/quic). Without a transport a node dispatches
// in-process only.
func WithTransport(t Transport) Option {
	return nodeOption(func(c *nodeConfig) { c.transport = t })
}

// WithListen makes the node serve its handlers to other nodes on addr
// ("127.0.0.1:0" picks a port; see [Node.Addr]). It needs [WithTransport].
func WithListen(addr string) Option {
	return nodeOption(func(c *nodeConfig) { c.listen = addr })
}

// WithDiscovery sets how the node finds other nodes: [StaticPeers], or
// gossip (runtime/swim). It needs [WithTransport].
func WithDiscovery(d discovery.Discovery) Option {
	return nodeOption(func(c *nodeConfig) { c.discovery = d })
}

// WithDefaultTimeout bounds remote calls whose context has no deadline
// (default 5s). The remaining budget travels with each call. It also
// bounds each dial to a peer and each pull of a peer's catalog when it is
// longer than 10s (the listeners' handshake timeout, which they get at
// least: one given up sooner throws away a loaded peer's work on it).
func WithDefaultTimeout(d time.Duration) Option {
	return nodeOption(func(c *nodeConfig) { c.defaultTimeout = d })
}

// WithCatalogRefresh sets how often the node pulls again the catalogs of
// peers that discovery gives no digest for (default 2s); an unchanged
// catalog is answered by its digest alone. Gossip discovery announces
// digests and triggers a pull on change instead.
func WithCatalogRefresh(d time.Duration) Option {
	return nodeOption(func(c *nodeConfig) { c.refresh = d })
}

// WithMaxDials limits the dials to peers (connect and handshake) the node
// runs at once; further dials wait for one to end. Zero means the default,
// 16. Each dial ends within 10s, or the node's default timeout
// ([WithDefaultTimeout]) when longer, so that addresses that drop packets
// cannot hold the node's dialling up for long.
func WithMaxDials(n int) Option { return nodeOption(func(c *nodeConfig) { c.maxDials = n }) }

// WithDedup sizes the table of recent calls by which a node answers a call
// sent to it again (refed after its connection dropped) without running the
// handler twice: a duplicate joins the running call or receives the stored
// answer. An answer is kept for ttl, within 64 MiB of answers (each
// counted with about 80 bytes of bookkeeping); a size other than zero
// also bounds their number. Answers are dropped half the table at a time,
// so the newest answers up to half of either bound are always kept. Zero
// means the default: 30s, and no bound on the number. [WithoutDedup] turns
// de-duplication off.
//
// A call whose answer is dropped before its ttl — for room, other
// callers' answers filling the bound — leaves its id behind until the
// ttl is up: a small record of fixed size, kept by caller, at most
// 1,048,576 of them node-wide (past that the caller holding the most
// loses its oldest). A copy of it that arrives then is answered
// [ErrAnswerDropped]: the call ran once, its answer is lost, and it does
// not run again. A caller sends a call again for up to 20s after its
// connection dropped, within the call's deadline, so a ttl shorter than
// that lets a late copy run a second time.
func WithDedup(size int, ttl time.Duration) Option {
	return nodeOption(func(c *nodeConfig) { c.dedupSize, c.dedupTTL, c.noDedup = size, ttl, false })
}

// WithDedupBytes bounds the bytes of the answers the de-duplication
// table keeps (see [WithDedup]), each counted with its bookkeeping. Zero
// means the default, 64 MiB. A smaller bound keeps answers a shorter time
// under load; the ids of the calls whose answers it drops stay all the
// same, so a copy of such a call still does not run again.
func WithDedupBytes(n int) Option {
	return nodeOption(func(c *nodeConfig) { c.dedupBytes = n })
}

// WithoutDedup turns de-duplication off (see [WithDedup]): a call refed
// after its connection dropped then runs again.
func WithoutDedup() Option {
	return nodeOption(func(c *nodeConfig) { c.noDedup = true })
}

// WithMaxPatternSize bounds the patterns a node takes from other nodes:
// those of the calls it serves, the pattern a call's message is overlaid
// with ([Node.Act] with a protobuf message), and those of its peers'
// catalogs. A pattern longer than bytes, or of more than keys keys, is
// refused before it is parsed: a call with one is answered
// [CodeInvalidArgument], a catalog with one is rejected whole. Zero means
// the default: 4096 bytes and 64 keys, where a real pattern is a few
// pairs. A handler whose pattern is over the limits serves only
// in-process calls (the node logs a warning when it is added); raise them
// on every node of the fleet to serve one.
func WithMaxPatternSize(bytes, keys int) Option {
	return nodeOption(func(c *nodeConfig) { c.maxPatternBytes, c.maxPatternKeys = bytes, keys })
}

// WithMaxMetadataSize bounds the metadata of the calls a node serves: a
// value may hold at most value bytes, and all keys and values of a call
// together at most total bytes. A call over either is answered
// [CodeInvalidArgument] without running its handler. Zero means the
// default: 8 KiB a value, 16 KiB in all.
func WithMaxMetadataSize(value, total int) Option {
	return nodeOption(func(c *nodeConfig) { c.maxMetaValue, c.maxMetaTotal = value, total })
}

// WithLogger sets the node's logger. By default the node logs its records
// at Warn and above to slog.Default() (looked up at each record): panics
// in handlers with their stacks, peers that cannot be dialled and
// connections to peers lost; Debug and Info only through a logger that
// asks for them. WithLogger(slog.New(slog.DiscardHandler)) silences the
// node. Either way the records at Warn and above are rate-limited per
// message: at most 10 in 10 s each, then one line with the count held
// back. A nil l means the default.
func WithLogger(l *slog.Logger) Option {
	return nodeOption(func(c *nodeConfig) { c.logger = l })
}

// WithMaxInFlight limits the handlers running at once on the node. Beyond n,
// the node answers [CodeResourceExhausted] at once without running the
// handler (the call is flagged as not run), so callers can go elsewhere.
// Zero means the default: 2,048 for each of GOMAXPROCS (4,096 on two
// cores), within a quarter of the Go memory limit (GOMEMLIMIT) at 64 KiB
// a handler when one is set, and at least 256. Raise it for handlers that
// mostly wait and are light; math.MaxInt lifts it. The stream transports
// (tcp, quic) share the limit fairly among the connections they serve:
// once the node is full, a connection beyond its part is refused the same
// way, so that a flood on one does not take the others' room.
func WithMaxInFlight(n int) Option {
	return nodeOption(func(c *nodeConfig) { c.maxInFlight = n })
}

// WithHandlerInterceptors wraps every handler added to the node; the first
// interceptor is the outermost.
func WithHandlerInterceptors(ics ...HandlerInterceptor) Option {
	return nodeOption(func(c *nodeConfig) { c.handlerICs = append(c.handlerICs, ics...) })
}

// WithCallInterceptors wraps every call the node makes; the first
// interceptor is the outermost.
func WithCallInterceptors(ics ...CallInterceptor) Option {
	return nodeOption(func(c *nodeConfig) { c.callICs = append(c.callICs, ics...) })
}

// WithOptions bundles opts into one option, applied in order (nil ones
// are skipped): a package that needs several node options, such as
// interceptors and an [Observer], gives them as one.
func WithOptions(opts ...Option) Option {
	opts = slices.Clone(opts)
	return nodeOption(func(c *nodeConfig) {
		for _, o := range opts {
			if o != nil {
				o.applyNode(c)
			}
		}
	})
}

type overrideOption struct{}

func (overrideOption) applyHandler(c *handlerConfig) { c.override = true }

// Override lets [Node.Add] replace a handler already added for the same
// pattern. The replaced handler becomes the new one's prior, callable with
// [Request.Prior] (Seneca's prior).
func Override() HandlerOption { return overrideOption{} }

type noReplyOption struct{}

func (noReplyOption) applyCall(c *callConfig) { c.noReply = true }

// NoReply makes a call fire and forget (MicroWizard's sync:false): it
// returns at once with an empty result and the handler's answer is dropped.
// Errors found before the handler runs (bad pattern, no match) are still
// returned.
func NoReply() CallOption { return noReplyOption{} }

// defaultOption holds the configuration of a call with this option
// alone, made with the option: configOf returns it, so that an option
// made once (as a gateway makes its own) costs its calls nothing. It is
// shared, so never written.
type defaultOption struct{ alone *callConfig }

func (o defaultOption) applyCall(c *callConfig) { c.hasDefault, c.def = true, o.alone.def }

// Default sets the result of a call that no pattern matches, instead of a
// [CodeNotFound] error.
func Default(v any) CallOption { return defaultOption{&callConfig{hasDefault: true, def: v}} }

type mixinOption []string

func (o mixinOption) applyCall(c *callConfig) { c.mixin = append(c.mixin, o...) }

// Mixin makes [Node.ActE] route by the named root fields of its data too,
// besides the pattern (which wins on a shared key). Keys given by several
// Mixin options add up.
func Mixin(keys ...string) CallOption { return mixinOption(keys) }

type timeoutOption time.Duration

func (o timeoutOption) applyCall(c *callConfig) { c.timeout = time.Duration(o) }

// Timeout bounds a call when its context has no earlier deadline. Zero
// means no bound of its own: the node's default for remote calls.
func Timeout(d time.Duration) CallOption { return timeoutOption(d) }

type idempotentOption struct{}

func (idempotentOption) applyCall(c *callConfig) { c.idempotent = true }

// Idempotent marks a call as safe to run more than once, so the runtime may
// retry it after it may have run (generated clients set it for methods whose
// idempotency_level is IDEMPOTENT or NO_SIDE_EFFECTS).
func Idempotent() CallOption { return idempotentOption{} }

type routeKeyOption string

func (o routeKeyOption) applyCall(c *callConfig) { c.key = string(o) }

// RouteKey sets the key by which a consistent-hash balancer picks the
// call's target (runtime/lb's ConsistentHash): calls with the same key go
// to the same target while the set of targets is unchanged. Pass a field
// of the message — a user id, an order id — for sticky routing. Other
// balancers ignore it.
func RouteKey(key string) CallOption { return routeKeyOption(key) }

type callOptions []CallOption

func (o callOptions) applyCall(c *callConfig) {
	for _, opt := range o {
		if opt != nil {
			opt.applyCall(c)
		}
	}
}

type handlerOptions []HandlerOption

func (o handlerOptions) applyHandler(c *handlerConfig) {
	for _, opt := range o {
		if opt != nil {
			opt.applyHandler(c)
		}
	}
}

// WithHandlerOptions bundles opts into one option, applied in order:
// generated registration passes its method's [Method] first and the
// caller's options after it.
func WithHandlerOptions(opts ...HandlerOption) HandlerOption {
	return handlerOptions(slices.Clone(opts))
}

// WithCallOptions bundles opts into one option, applied in order: a
// generated client passes its method's defaults first and the caller's
// options after them, which win.
func WithCallOptions(opts ...CallOption) CallOption { return callOptions(slices.Clone(opts)) }
