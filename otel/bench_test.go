package wizotel_test

import (
	"context"
	"io"
	"testing"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	wizotel "github.com/wizardmesh/wizard/otel"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// BenchmarkRemoteCall is a typed call over TCP on loopback, both nodes
// instrumented alike: off (no Instrument), Instrument with no provider
// (the globals untouched), the runtime's part of tracing alone
// (traceparent_only), tracing that never samples (with and without
// metrics), and tracing that always samples, without and with metrics
// (spans to a batcher whose exporter drops them, as in production; and,
// to tell the batcher's part, to the same exporter synchronously).
// Run with -count to alternate them: go test -run '^$' -bench RemoteCall
// -count 10. [BenchmarkSDKCost] is the part of it the SDK's own work
// takes.
func BenchmarkRemoteCall(b *testing.B) {
	tracer := func(b *testing.B, opts ...sdktrace.TracerProviderOption) wizotel.Option {
		tp := sdktrace.NewTracerProvider(opts...)
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return wizotel.WithTracerProvider(tp)
	}
	meter := func(b *testing.B) wizotel.Option {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		return wizotel.WithMeterProvider(mp)
	}
	never := sdktrace.WithSampler(sdktrace.NeverSample())
	for _, bc := range []struct {
		name string
		opt  func(b *testing.B) runtime.Option // nil: none
	}{
		{"off", nil},
		{"no_provider", func(*testing.B) runtime.Option { return wizotel.Instrument() }},
		// The runtime's part of tracing, without OpenTelemetry: a call
		// interceptor that adds a traceparent to the call's metadata and a
		// handler interceptor that reads it.
		{"traceparent_only", func(*testing.B) runtime.Option { return traceparentOnly() }},
		{"never_sample", func(b *testing.B) runtime.Option { return wizotel.Instrument(tracer(b, never)) }},
		{"never_sample+metrics", func(b *testing.B) runtime.Option { return wizotel.Instrument(tracer(b, never), meter(b)) }},
		{"always_sample", func(b *testing.B) runtime.Option {
			return wizotel.Instrument(tracer(b, sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(tracetest.NewNoopExporter())))
		}},
		{"always_sample+metrics", func(b *testing.B) runtime.Option {
			// Spans go to a batcher, as in production, whose exporter
			// drops them.
			return wizotel.Instrument(tracer(b, sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(tracetest.NewNoopExporter())), meter(b))
		}},
		// The same with the spans exported on the goroutine that ends
		// them: what the batcher's goroutine costs the calls.
		{"always_sample+metrics+sync_export", func(b *testing.B) runtime.Option {
			return wizotel.Instrument(tracer(b, sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSyncer(tracetest.NewNoopExporter())), meter(b))
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var opts []runtime.Option
			if bc.opt != nil {
				opts = append(opts, bc.opt(b))
			}
			client := benchPair(b, opts)
			ctx := context.Background()
			req := &mathv1.SumRequest{Values: []float64{1, 2}}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.Sum(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// traceparentOnly is the option of the traceparent_only benchmark.
func traceparentOnly() runtime.Option {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	return runtime.WithOptions(
		runtime.WithCallInterceptors(func(next runtime.Invoker) runtime.Invoker {
			return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
				return next(runtime.AppendMetadata(ctx, "traceparent", tp), c)
			}
		}),
		runtime.WithHandlerInterceptors(func(next runtime.Handler) runtime.Handler {
			return func(ctx context.Context, r runtime.Request) (any, error) {
				if runtime.IncomingMetadata(ctx).Get("traceparent") != tp {
					return nil, runtime.Errorf(runtime.CodeInternal, "no traceparent")
				}
				return next(ctx, r)
			}
		}),
	)
}

// benchPair starts a math server and a client calling it over TCP, both
// with opts.
func benchPair(b *testing.B, opts []runtime.Option) mathv1.MathServiceClient {
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
	srv := mk(runtime.WithListen("127.0.0.1:0"))
	if err := mathv1.RegisterMathServiceHandler(srv, sumOnly{}); err != nil {
		b.Fatal(err)
	}
	cl := mk(runtime.WithDiscovery(runtime.StaticPeers(srv.Addr())))
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := cl.WaitFor(ctx, mathv1.MathServiceSumPattern); err != nil {
		b.Fatal(err)
	}
	c, err := mathv1.NewMathServiceClient(cl)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

type sumOnly struct {
	mathv1.UnimplementedMathServiceHandler
}

func (sumOnly) Sum(_ context.Context, r *mathv1.SumRequest) (*mathv1.SumResponse, error) {
	var s float64
	for _, v := range r.GetValues() {
		s += v
	}
	return &mathv1.SumResponse{Sum: s}, nil
}

// BenchmarkSDKCost is the SDK's own work for one call of
// [BenchmarkRemoteCall], both sides of it, without wizard: a client and
// a server span started and ended (the server's a child of the client's,
// as a remote parent), never sampled, or always sampled with the
// attributes the interceptors set and a batcher whose exporter drops
// them (or no processor); and the two duration histograms recorded with
// a prepared attribute set.
func BenchmarkSDKCost(b *testing.B) {
	attrs := []attribute.KeyValue{
		attribute.String("rpc.system.name", "wizard"), attribute.String("rpc.method", mathv1.MathServiceSumProcedure),
		attribute.String("rpc.response.status_code", "ok"), attribute.String("wizard.pattern", "cmd:sum,role:math"),
		attribute.String("wizard.target", "node-1"), attribute.String("server.address", "127.0.0.1"), attribute.Int("server.port", 4000),
	}
	spans := func(b *testing.B, opts ...sdktrace.TracerProviderOption) {
		tp := sdktrace.NewTracerProvider(opts...)
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		tr := tp.Tracer("bench")
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			cctx, cs := tr.Start(ctx, mathv1.MathServiceSumProcedure, trace.WithSpanKind(trace.SpanKindClient))
			sctx := trace.ContextWithRemoteSpanContext(ctx, trace.SpanContextFromContext(cctx))
			_, ss := tr.Start(sctx, mathv1.MathServiceSumProcedure, trace.WithSpanKind(trace.SpanKindServer))
			if ss.IsRecording() {
				ss.SetAttributes(attrs...)
				cs.SetAttributes(attrs...)
			}
			ss.End()
			cs.End()
		}
	}
	b.Run("never_sample", func(b *testing.B) { spans(b, sdktrace.WithSampler(sdktrace.NeverSample())) })
	b.Run("always_sample", func(b *testing.B) {
		spans(b, sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	})
	b.Run("always_sample_no_processor", func(b *testing.B) { spans(b, sdktrace.WithSampler(sdktrace.AlwaysSample())) })
	b.Run("metrics", func(b *testing.B) {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		h, err := mp.Meter("bench").Float64Histogram("d")
		if err != nil {
			b.Fatal(err)
		}
		set := []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attrs[:3]...))} // made once, as the interceptors do
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			h.Record(ctx, 1e-5, set...)
			h.Record(ctx, 1e-5, set...)
		}
	})
}

// BenchmarkRemoteStream is a stream over TCP on loopback, both nodes
// instrumented alike: opened, one message each way, ended by the
// handler. The instrumentation works at a stream's open and end only
// (the runtime counts its messages), so this is its cost per stream.
func BenchmarkRemoteStream(b *testing.B) {
	for _, bc := range []struct {
		name string
		opt  func(b *testing.B) runtime.Option // nil: none
	}{
		{"off", nil},
		{"always_sample+metrics", func(b *testing.B) runtime.Option {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() {
				_ = tp.Shutdown(context.Background())
				_ = mp.Shutdown(context.Background())
			})
			return wizotel.Instrument(wizotel.WithTracerProvider(tp), wizotel.WithMeterProvider(mp))
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var opts []runtime.Option
			if bc.opt != nil {
				opts = append(opts, bc.opt(b))
			}
			cl := benchStreamPair(b, opts)
			ctx := context.Background()
			msg := map[string]any{"n": 1}
			b.ReportAllocs()
			for b.Loop() {
				st, err := cl.OpenStream(ctx, countPattern)
				if err != nil {
					b.Fatal(err)
				}
				if err := st.Send(msg); err != nil {
					b.Fatal(err)
				}
				st.CloseSend()
				if _, err := st.Recv(); err != nil {
					b.Fatal(err)
				}
				if _, err := st.Recv(); err != io.EOF {
					b.Fatalf("the stream's end: %v, want io.EOF", err)
				}
				st.Close()
			}
		})
	}
}

// benchStreamPair starts a node serving count and a client of it over
// TCP, both with opts, and returns the client.
func benchStreamPair(b *testing.B, opts []runtime.Option) *runtime.Node {
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
	srv := mk(runtime.WithListen("127.0.0.1:0"))
	if err := srv.Add(countPattern, count(nil, nil, nil)); err != nil {
		b.Fatal(err)
	}
	cl := mk(runtime.WithDiscovery(runtime.StaticPeers(srv.Addr())))
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := cl.WaitFor(ctx, countPattern); err != nil {
		b.Fatal(err)
	}
	return cl
}
