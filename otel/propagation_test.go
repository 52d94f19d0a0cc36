package wizotel_test

import (
	"context"
	"testing"

	wizotel "github.com/wizardmesh/wizard/otel"
	"github.com/wizardmesh/wizard/runtime"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TestPropagationOverTCP: with the default propagation (W3C trace
// context and baggage, carried without a carrier), with
// propagation.TraceContext alone, and with a propagator of the user's
// (here a composite of the same two, which goes through the generic
// carrier), a call over TCP makes the server span a child of the call
// span, keeps the caller's tracestate, and brings the caller's baggage
// to the handler when the propagator carries baggage.
func TestPropagationOverTCP(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []wizotel.Option
		baggage bool
	}{
		{"default", nil, true},
		{"trace context", []wizotel.Option{wizotel.WithPropagators(propagation.TraceContext{})}, false},
		{"user's", []wizotel.Option{wizotel.WithPropagators(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm := newTelemetry(t)
			opt := func() runtime.Option {
				return wizotel.Instrument(append([]wizotel.Option{wizotel.WithTracerProvider(tm.tp), wizotel.WithMeterProvider(tm.mp)}, tc.opts...)...)
			}
			srv := server(t, tcpTransport(t), nil, opt())
			var gotBaggage string
			var gotState string
			if err := srv.Add("role:b", func(ctx context.Context, r runtime.Request) (any, error) {
				gotBaggage = baggage.FromContext(ctx).Member("tenant").Value()
				gotState = trace.SpanContextFromContext(ctx).TraceState().Get("vendor")
				return nil, nil
			}); err != nil {
				t.Fatal(err)
			}
			cl := client(t, tcpTransport(t), []string{srv.Addr()}, opt())
			waitFor(t, cl, "role:b", 1)

			m, err := baggage.NewMember("tenant", "t1")
			if err != nil {
				t.Fatal(err)
			}
			bag, err := baggage.New(m)
			if err != nil {
				t.Fatal(err)
			}
			ts, err := trace.ParseTraceState("vendor=v1")
			if err != nil {
				t.Fatal(err)
			}
			// A remote parent with a tracestate: the call span inherits it.
			parent := trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true,
			})
			ctx := baggage.ContextWithBaggage(trace.ContextWithRemoteSpanContext(callCtx(t), parent), bag)
			if _, err := cl.ActE(ctx, "role:b", nil); err != nil {
				t.Fatal(err)
			}
			spans := tm.ended()
			call := one(t, spans, "role:b", trace.SpanKindClient)
			serve := one(t, spans, "role:b", trace.SpanKindServer)
			if !childOf(serve, call) {
				t.Errorf("the server span is a child of %v, want the call span %v", serve.Parent.SpanID(), call.SpanContext.SpanID())
			}
			if call.SpanContext.TraceID() != parent.TraceID() {
				t.Errorf("the call span is in trace %v, want its parent's %v", call.SpanContext.TraceID(), parent.TraceID())
			}
			if gotState != "v1" {
				t.Errorf("the handler's tracestate vendor = %q, want v1", gotState)
			}
			want := ""
			if tc.baggage {
				want = "t1"
			}
			if gotBaggage != want {
				t.Errorf("the handler's baggage tenant = %q, want %q", gotBaggage, want)
			}
		})
	}
}
