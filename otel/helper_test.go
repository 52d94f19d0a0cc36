package wizotel_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	wizotel "github.com/wizardmesh/wizard/otel"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/pattern"
	"github.com/wizardmesh/wizard/runtime/quic"
	"github.com/wizardmesh/wizard/runtime/tcp"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// guard bounds every wait of these tests: long, so that a loaded machine
// never fails them, and only a hang reaches it.
const guard = 30 * time.Second

var quiet = slog.New(slog.DiscardHandler)

// telemetry is the real SDK with an in-memory span exporter and a manual
// metric reader.
type telemetry struct {
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newTelemetry(t *testing.T) *telemetry {
	t.Helper()
	tm := &telemetry{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	tm.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(tm.spans), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	tm.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(tm.reader))
	t.Cleanup(func() {
		_ = tm.tp.Shutdown(context.Background())
		_ = tm.mp.Shutdown(context.Background())
	})
	return tm
}

// option instruments a node with tm's providers.
func (tm *telemetry) option() runtime.Option {
	return wizotel.Instrument(wizotel.WithTracerProvider(tm.tp), wizotel.WithMeterProvider(tm.mp))
}

// ended returns the spans ended so far.
func (tm *telemetry) ended() tracetest.SpanStubs { return tm.spans.GetSpans() }

// collect reads the metrics.
func (tm *telemetry) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tm.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// find returns the spans named name of kind kind.
func find(spans tracetest.SpanStubs, name string, kind trace.SpanKind) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name && s.SpanKind == kind {
			out = append(out, s)
		}
	}
	return out
}

// one returns the one span named name of kind kind, failing t otherwise.
func one(t *testing.T, spans tracetest.SpanStubs, name string, kind trace.SpanKind) tracetest.SpanStub {
	t.Helper()
	got := find(spans, name, kind)
	if len(got) != 1 {
		t.Fatalf("%d %v spans %q, want 1; spans: %v", len(got), kind, name, names(spans))
	}
	return got[0]
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.SpanKind.String()+" "+s.Name)
	}
	return out
}

// attr returns s's attribute key, as a string ("" when absent).
func attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// hasEvent reports whether s has an event named name.
func hasEvent(s tracetest.SpanStub, name string) bool {
	return slices.ContainsFunc(s.Events, func(e sdktrace.Event) bool { return e.Name == name })
}

// childOf reports whether s's parent is p.
func childOf(s, p tracetest.SpanStub) bool {
	return s.Parent.SpanID() == p.SpanContext.SpanID() && s.SpanContext.TraceID() == p.SpanContext.TraceID()
}

// sum returns the value of the int64 sum (counter) name at the point
// whose attributes include want, and whether there is one.
func sum(rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) (int64, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if hasAttrs(p.Attributes, want) {
						return p.Value, true
					}
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					if hasAttrs(p.Attributes, want) {
						return p.Value, true
					}
				}
			}
		}
	}
	return 0, false
}

// histCount returns the count of the histogram name at the point whose
// attributes include want.
func histCount(rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) (uint64, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == name {
				for _, p := range d.DataPoints {
					if hasAttrs(p.Attributes, want) {
						return p.Count, true
					}
				}
			}
		}
	}
	return 0, false
}

func hasAttrs(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// transport makes the transports of one test: tcp, or quic with
// self-signed certificates.
type transport func(t *testing.T) runtime.Transport

func tcpTransport(t *testing.T) runtime.Transport {
	t.Helper()
	tr, err := tcp.New(tcp.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func quicTransport(t *testing.T) runtime.Transport {
	t.Helper()
	tr, err := quic.New(quic.WithInsecureSelfSigned(), quic.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// newNode starts a node closed when the test ends.
func newNode(t *testing.T, opts ...runtime.Option) *runtime.Node {
	t.Helper()
	n, err := runtime.New(append([]runtime.Option{runtime.WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// server starts a node of tr listening on 127.0.0.1, calling addrs.
func server(t *testing.T, tr runtime.Transport, addrs []string, opts ...runtime.Option) *runtime.Node {
	t.Helper()
	base := []runtime.Option{runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"), runtime.WithCatalogRefresh(50 * time.Millisecond)}
	if len(addrs) > 0 {
		base = append(base, runtime.WithDiscovery(runtime.StaticPeers(addrs...)))
	}
	return newNode(t, append(base, opts...)...)
}

// client starts a node of tr calling addrs.
func client(t *testing.T, tr runtime.Transport, addrs []string, opts ...runtime.Option) *runtime.Node {
	t.Helper()
	base := []runtime.Option{runtime.WithTransport(tr), runtime.WithDiscovery(runtime.StaticPeers(addrs...)), runtime.WithCatalogRefresh(50 * time.Millisecond)}
	return newNode(t, append(base, opts...)...)
}

// waitFor waits until n routes pat to want remote targets.
func waitFor(t *testing.T, n *runtime.Node, pat string, want int) {
	t.Helper()
	p := pattern.MustParse(pat)
	until(t, "pattern "+pat+" routable", func() bool {
		for _, pi := range n.Patterns() {
			if pi.Pattern.Equal(p) && len(pi.Remote) >= want {
				return true
			}
		}
		return false
	})
}

// until polls cond until it holds, failing t after the guard.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(guard)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, guard)
		}
		<-tick.C
	}
}

// callCtx is a context for one call of a test.
func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	t.Cleanup(cancel)
	return ctx
}

// cutProxy forwards TCP connections to a target and cuts them all on
// demand; connections made after a cut are forwarded again.
type cutProxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{l: l, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		l.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) addr() string { return p.l.Addr().String() }

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

func (p *cutProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
