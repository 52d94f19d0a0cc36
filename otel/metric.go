package wizotel

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/wizardmesh/wizard/runtime"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// The names of the instruments and attributes.
const (
	scope = "github.com/wizardmesh/wizard/otel"

	metricClientDuration = "rpc.client.call.duration"
	metricServerDuration = "rpc.server.call.duration"
	metricClientActive   = "wizard.client.calls.active"
	metricServerActive   = "wizard.server.calls.active"
	metricClientRefused  = "wizard.client.attempts.refused"
	metricClientRetries  = "wizard.client.retries"
	metricClientRefeeds  = "wizard.client.refeeds"
	metricServerRefused  = "wizard.server.refused"
	metricServerDups     = "wizard.server.duplicates"
	metricBreaker        = "wizard.breaker.transitions"
	metricPeers          = "wizard.peers"
	metricNodeShed       = "wizard.node.shed"
	metricNodeRetries    = "wizard.node.retries"
	metricNodeRefeeds    = "wizard.node.refeeds"
	metricNodeDups       = "wizard.node.duplicates"

	metricClientStreams        = "wizard.client.streams.active"
	metricServerStreams        = "wizard.server.streams.active"
	metricClientStreamDuration = "wizard.client.stream.duration"
	metricServerStreamDuration = "wizard.server.stream.duration"
	metricClientStreamSent     = "wizard.client.stream.messages.sent"
	metricClientStreamReceived = "wizard.client.stream.messages.received"
	metricServerStreamSent     = "wizard.server.stream.messages.sent"
	metricServerStreamReceived = "wizard.server.stream.messages.received"

	keySystem  = semconv.RPCSystemNameKey
	keyMethod  = semconv.RPCMethodKey
	keyCode    = semconv.RPCResponseStatusCodeKey
	keyPattern = attribute.Key("wizard.pattern")
	keyTarget  = attribute.Key("wizard.target")
	keyAttempt = attribute.Key("wizard.attempt")
	keyCaller  = attribute.Key("wizard.caller")
	keyNode    = attribute.Key("wizard.node.id")
	keyState   = attribute.Key("wizard.peer.state")
	keyFrom    = attribute.Key("wizard.breaker.from")
	keyTo      = attribute.Key("wizard.breaker.to")

	keyStream         = attribute.Key("wizard.stream")
	keyStreamSent     = attribute.Key("wizard.stream.messages_sent")
	keyStreamReceived = attribute.Key("wizard.stream.messages_received")

	system = "wizard"
)

var systemAttr = keySystem.String(system)

// durationBuckets are the bounds of the duration histograms, in seconds:
// from 50µs (a call on loopback) to 10s.
var durationBuckets = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// streamDurationBuckets are the bounds of the stream duration histograms,
// in seconds: from 1ms (a short server stream) to an hour (a
// subscription).
var streamDurationBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600}

// metrics are the instruments of an [Instrument]ation.
type metrics struct {
	meter                          metric.Meter
	clientDuration, serverDuration metric.Float64Histogram
	clientActive, serverActive     metric.Int64ObservableUpDownCounter
	clientRefused, retries         metric.Int64Counter
	refeeds, serverRefused, dups   metric.Int64Counter
	peers                          metric.Int64ObservableGauge
	shed, nodeRetries              metric.Int64ObservableCounter
	nodeRefeeds, nodeDups          metric.Int64ObservableCounter

	// Of streams, by side (client, server).
	streamsActive  [2]metric.Int64ObservableUpDownCounter
	streamDuration [2]metric.Float64Histogram
	streamSent     [2]metric.Int64Counter
	streamReceived [2]metric.Int64Counter

	by attrCache // by procedure, and by procedure and code

	events *eventMetrics

	// The calls in flight are counted in by's entries and observed from
	// them while a node uses the metrics (see observeActive).
	activeMu    sync.Mutex
	activeUsers int
	activeReg   metric.Registration
}

func newMetrics(mp metric.MeterProvider) (*metrics, error) {
	m := &metrics{meter: mp.Meter(scope, metric.WithSchemaURL(semconv.SchemaURL))}
	var errs [22]error
	m.clientDuration, errs[0] = m.meter.Float64Histogram(metricClientDuration, metric.WithUnit("s"),
		metric.WithDescription("The duration of the calls a node makes, by procedure and code."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	m.serverDuration, errs[1] = m.meter.Float64Histogram(metricServerDuration, metric.WithUnit("s"),
		metric.WithDescription("The duration of the calls a node serves, by procedure and code."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	m.clientActive, errs[2] = m.meter.Int64ObservableUpDownCounter(metricClientActive, metric.WithUnit("{call}"),
		metric.WithDescription("The calls a node makes that are in flight, by procedure."))
	m.serverActive, errs[3] = m.meter.Int64ObservableUpDownCounter(metricServerActive, metric.WithUnit("{call}"),
		metric.WithDescription("The calls a node serves that are in flight, by procedure."))
	m.clientRefused, errs[4] = m.meter.Int64Counter(metricClientRefused, metric.WithUnit("{attempt}"),
		metric.WithDescription("The attempts of a node's calls that their target refused without running them, by procedure and code."))
	m.retries, errs[5] = m.meter.Int64Counter(metricClientRetries, metric.WithUnit("{attempt}"),
		metric.WithDescription("The attempts a node sent to another target after an attempt failed or was refused, by procedure."))
	m.refeeds, errs[6] = m.meter.Int64Counter(metricClientRefeeds, metric.WithUnit("{call}"),
		metric.WithDescription("The calls a node sent again, same id, to the same run of a peer after the connection dropped, by procedure."))
	m.serverRefused, errs[7] = m.meter.Int64Counter(metricServerRefused, metric.WithUnit("{call}"),
		metric.WithDescription("The calls a node refused without running the handler (over its in-flight limit, closing), by procedure and code."))
	m.dups, errs[8] = m.meter.Int64Counter(metricServerDups, metric.WithUnit("{call}"),
		metric.WithDescription("The calls a node received again and answered from its de-duplication table, by procedure."))
	m.peers, errs[9] = m.meter.Int64ObservableGauge(metricPeers, metric.WithUnit("{peer}"),
		metric.WithDescription("The peers a node knows, by state: connected, suspect, disconnected."))
	m.shed, errs[10] = m.meter.Int64ObservableCounter(metricNodeShed, metric.WithUnit("{call}"),
		metric.WithDescription("Node.Stats().Shed: the calls the node refused as over its in-flight limit."))
	m.nodeRetries, errs[11] = m.meter.Int64ObservableCounter(metricNodeRetries, metric.WithUnit("{attempt}"),
		metric.WithDescription("Node.Stats().Retries: the attempts the node sent to another target."))
	m.nodeRefeeds, errs[12] = m.meter.Int64ObservableCounter(metricNodeRefeeds, metric.WithUnit("{call}"),
		metric.WithDescription("Node.Stats().Refeeds: the calls the node sent again after their connection dropped."))
	m.nodeDups, errs[13] = m.meter.Int64ObservableCounter(metricNodeDups, metric.WithUnit("{call}"),
		metric.WithDescription("Node.Stats().Duplicates: the calls the node answered from its de-duplication table."))
	m.streamsActive[client], errs[14] = m.meter.Int64ObservableUpDownCounter(metricClientStreams, metric.WithUnit("{stream}"),
		metric.WithDescription("The remote streams a node opened that are open, by procedure."))
	m.streamsActive[server], errs[15] = m.meter.Int64ObservableUpDownCounter(metricServerStreams, metric.WithUnit("{stream}"),
		metric.WithDescription("The streams a node serves that are open, by procedure."))
	m.streamDuration[client], errs[16] = m.meter.Float64Histogram(metricClientStreamDuration, metric.WithUnit("s"),
		metric.WithDescription("The duration of the remote streams a node opened, from the open to the end, by procedure and code."), metric.WithExplicitBucketBoundaries(streamDurationBuckets...))
	m.streamDuration[server], errs[17] = m.meter.Float64Histogram(metricServerStreamDuration, metric.WithUnit("s"),
		metric.WithDescription("The duration of the streams a node serves, from the handler's start to its return, by procedure and code."), metric.WithExplicitBucketBoundaries(streamDurationBuckets...))
	m.streamSent[client], errs[18] = m.meter.Int64Counter(metricClientStreamSent, metric.WithUnit("{message}"),
		metric.WithDescription("The messages a node sent on the remote streams it opened, counted when each stream ends, by procedure."))
	m.streamReceived[client], errs[19] = m.meter.Int64Counter(metricClientStreamReceived, metric.WithUnit("{message}"),
		metric.WithDescription("The messages a node received on the remote streams it opened, counted when each stream ends, by procedure."))
	m.streamSent[server], errs[20] = m.meter.Int64Counter(metricServerStreamSent, metric.WithUnit("{message}"),
		metric.WithDescription("The messages a node's stream handlers sent, counted when each stream ends, by procedure."))
	m.streamReceived[server], errs[21] = m.meter.Int64Counter(metricServerStreamReceived, metric.WithUnit("{message}"),
		metric.WithDescription("The messages a node's stream handlers received, counted when each stream ends, by procedure."))
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	var err error
	if m.events, err = newEventMetrics(m.meter); err != nil {
		return nil, err
	}
	return m, nil
}

// observeActive observes the calls in flight and the open streams while
// a node uses m: the first node registers the callback, and the function
// it returns, once the last has called it, unregisters it. Counted in
// m's own entries rather than added to an UpDownCounter at each start
// and end, the calls in flight cost a call two atomic adds, not two
// measurements. A procedure's calls in flight are observed unless it has
// had only streams, its open streams once it has had one.
func (m *metrics) observeActive() (func(), error) {
	m.activeMu.Lock()
	defer m.activeMu.Unlock()
	if m.activeUsers == 0 {
		reg, err := m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			m.by.eachActive(func(a *attrOpts) {
				k := a.kinds.Load()
				if k&kindStream == 0 || k&kindCall != 0 {
					o.ObserveInt64(m.clientActive, a.active[client].Load(), a.observe...)
					o.ObserveInt64(m.serverActive, a.active[server].Load(), a.observe...)
				}
				if k&kindStream != 0 {
					o.ObserveInt64(m.streamsActive[client], a.streams[client].Load(), a.observe...)
					o.ObserveInt64(m.streamsActive[server], a.streams[server].Load(), a.observe...)
				}
			})
			return nil
		}, m.clientActive, m.serverActive, m.streamsActive[client], m.streamsActive[server])
		if err != nil {
			return nil, err
		}
		m.activeReg = reg
	}
	m.activeUsers++
	var once sync.Once
	return func() {
		once.Do(func() {
			m.activeMu.Lock()
			defer m.activeMu.Unlock()
			if m.activeUsers--; m.activeUsers == 0 {
				_ = m.activeReg.Unregister()
				m.activeReg = nil
			}
		})
	}, nil
}

// observeNode registers the callback that reports n's Stats and peers;
// the function it returns unregisters it.
func (m *metrics) observeNode(n *runtime.Node) (func(), error) {
	node := metric.WithAttributes(keyNode.String(n.ID()))
	states := [3]string{"connected", "suspect", "disconnected"}
	var stateOpts [3]metric.ObserveOption
	for i, s := range states {
		stateOpts[i] = metric.WithAttributes(keyNode.String(n.ID()), keyState.String(s))
	}
	reg, err := m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := n.Stats()
		o.ObserveInt64(m.shed, int64(s.Shed), node)
		o.ObserveInt64(m.nodeRetries, int64(s.Retries), node)
		o.ObserveInt64(m.nodeRefeeds, int64(s.Refeeds), node)
		o.ObserveInt64(m.nodeDups, int64(s.Duplicates), node)
		var count [3]int64
		for _, mb := range n.Members() {
			switch {
			case mb.Self:
			case mb.Suspect:
				count[1]++
			case mb.Connected:
				count[0]++
			default:
				count[2]++
			}
		}
		for i := range states {
			o.ObserveInt64(m.peers, count[i], stateOpts[i])
		}
		return nil
	}, m.shed, m.nodeRetries, m.nodeRefeeds, m.nodeDups, m.peers)
	if err != nil {
		return nil, err
	}
	return func() { _ = reg.Unregister() }, nil
}

// attrKey names a set of a measurement's attributes: a procedure, and a
// code when hasCode.
type attrKey struct {
	procedure string
	code      runtime.Code
	hasCode   bool
}

// attrOpts are the options of measurements with one set of attributes,
// made once: recording with them allocates nothing. An entry by
// procedure alone counts that procedure's calls in flight.
type attrOpts struct {
	record  []metric.RecordOption
	add     []metric.AddOption
	observe []metric.ObserveOption

	active  [2]atomic.Int64 // the calls in flight: by client, by server
	streams [2]atomic.Int64 // the open streams: by client, by server
	kinds   atomic.Uint32   // kindCall, kindStream: what the procedure has had
}

// The kinds of an entry's procedure: it had calls, streams.
const (
	kindCall = 1 << iota
	kindStream
)

// mark records that o's procedure had kind.
func (o *attrOpts) mark(kind uint32) {
	if o.kinds.Load()&kind == 0 {
		o.kinds.Or(kind)
	}
}

// The sides of a call or stream, indexing attrOpts.active and .streams
// and the stream instruments.
const (
	client = iota
	server
)

// maxCachedSets bounds the attribute sets kept; past it, measurements
// make theirs each time.
const maxCachedSets = 4096

// attrCache keeps the attribute sets of measurements by procedure and
// code.
type attrCache struct {
	mu   sync.RWMutex
	sets map[attrKey]*attrOpts

	overflow atomic.Pointer[attrOpts] // [other]'s, for the calls in flight of procedures not kept
}

// active returns the entry that counts the calls in flight of procedure:
// its own, or, once maxCachedSets are kept, the one of [other].
func (c *attrCache) active(procedure string) *attrOpts {
	o := c.kept(procedure)
	o.mark(kindCall)
	return o
}

// streams returns the entry that counts the open streams of procedure,
// as active does for calls.
func (c *attrCache) streams(procedure string) *attrOpts {
	o := c.kept(procedure)
	o.mark(kindStream)
	return o
}

// kept returns the entry of procedure alone if it is kept, else the one
// of [other].
func (c *attrCache) kept(procedure string) *attrOpts {
	o, kept := c.lookup(procedure, 0, false)
	if kept {
		return o
	}
	if o := c.overflow.Load(); o != nil {
		return o
	}
	o = newAttrOpts(other, 0, false)
	if !c.overflow.CompareAndSwap(nil, o) {
		o = c.overflow.Load()
	}
	return o
}

// eachActive calls f with every entry that counts calls in flight or
// open streams.
func (c *attrCache) eachActive(f func(*attrOpts)) {
	c.mu.RLock()
	for k, o := range c.sets {
		if !k.hasCode {
			f(o)
		}
	}
	c.mu.RUnlock()
	if o := c.overflow.Load(); o != nil {
		f(o)
	}
}

// of returns the options for procedure (and code, when hasCode).
func (c *attrCache) of(procedure string, code runtime.Code, hasCode bool) *attrOpts {
	o, _ := c.lookup(procedure, code, hasCode)
	return o
}

// lookup returns the options for procedure (and code, when hasCode), and
// whether they are kept.
func (c *attrCache) lookup(procedure string, code runtime.Code, hasCode bool) (*attrOpts, bool) {
	k := attrKey{procedure, code, hasCode}
	c.mu.RLock()
	o := c.sets[k]
	c.mu.RUnlock()
	if o != nil {
		return o, true
	}
	o = newAttrOpts(procedure, code, hasCode)
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev := c.sets[k]; prev != nil {
		return prev, true // made meanwhile: its counts are the ones observed
	}
	if c.sets == nil {
		c.sets = make(map[attrKey]*attrOpts)
	}
	if len(c.sets) >= maxCachedSets {
		return o, false
	}
	c.sets[k] = o
	return o, true
}

func newAttrOpts(procedure string, code runtime.Code, hasCode bool) *attrOpts {
	attrs := []attribute.KeyValue{systemAttr, keyMethod.String(procedure)}
	if hasCode {
		attrs = append(attrs, keyCode.String(code.String()))
	}
	set := metric.WithAttributeSet(attribute.NewSet(attrs...))
	return &attrOpts{record: []metric.RecordOption{set}, add: []metric.AddOption{set}, observe: []metric.ObserveOption{set}}
}
