package wizotel_test

import (
	"context"
	"testing"

	wizotel "github.com/wizardmesh/wizard/otel"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkEmit is an event emitted over TCP on loopback to two groups,
// a node each, all nodes instrumented alike: off, metrics alone, and
// tracing that always samples with metrics (spans to a batcher whose
// exporter drops them: a producer span per group, whose context travels
// to the group's consumer span). Run with -count to alternate them:
// go test -run '^$' -bench Emit -count 5.
func BenchmarkEmit(b *testing.B) {
	meter := func(b *testing.B) wizotel.Option {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		return wizotel.WithMeterProvider(mp)
	}
	sampled := func(b *testing.B) wizotel.Option {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return wizotel.WithTracerProvider(tp)
	}
	for _, bc := range []struct {
		name string
		opt  func(b *testing.B) runtime.Option // nil: none
	}{
		{"off", nil},
		{"metrics", func(b *testing.B) runtime.Option { return wizotel.Instrument(meter(b)) }},
		{"always_sample+metrics", func(b *testing.B) runtime.Option { return wizotel.Instrument(sampled(b), meter(b)) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var opts []runtime.Option
			if bc.opt != nil {
				opts = append(opts, bc.opt(b))
			}
			emitter := benchGroups(b, opts)
			ctx := context.Background()
			msg := map[string]any{"id": 7}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := emitter.Emit(ctx, placed, msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchGroups starts two subscribers over TCP, in groups billing and
// shipping, and an emitter that reaches both.
func benchGroups(b *testing.B, opts []runtime.Option) *runtime.Node {
	b.Helper()
	mk := func(extra ...runtime.Option) *runtime.Node {
		tr, err := tcp.New(tcp.WithLogger(quiet))
		if err != nil {
			b.Fatal(err)
		}
		n, err := runtime.New(append(append([]runtime.Option{runtime.WithLogger(quiet), runtime.WithTransport(tr)}, opts...), extra...)...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { n.Close() })
		return n
	}
	var addrs []string
	for _, g := range []string{"billing", "shipping"} {
		s := mk(runtime.WithListen("127.0.0.1:0"))
		if err := s.Subscribe(placedPattern, g, took); err != nil {
			b.Fatal(err)
		}
		addrs = append(addrs, s.Addr())
	}
	e := mk(runtime.WithDiscovery(runtime.StaticPeers(addrs...)))
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := e.WaitForSubscribers(ctx, placed, "billing", "shipping"); err != nil {
		b.Fatal(err)
	}
	return e
}
