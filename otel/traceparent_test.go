package wizotel

import (
	"context"
	"maps"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// FuzzParseTraceparent: parseTraceparent accepts what
// propagation.TraceContext accepts, and reads the same ids and flags.
func FuzzParseTraceparent(f *testing.F) {
	for _, s := range []string{
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-04",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-",
		"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-09-extra",
		"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-09x",
		"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"fe-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-00000000000000000000000000000000-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
		"00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b71692033-3101",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		want := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{keyTraceparent: h}))
		tid, sid, flags, ok := parseTraceparent(h)
		if ok != want.IsValid() {
			t.Fatalf("parseTraceparent(%q) ok = %v, propagation.TraceContext: valid %v", h, ok, want.IsValid())
		}
		if ok && (tid != want.TraceID() || sid != want.SpanID() || flags != want.TraceFlags()) {
			t.Fatalf("parseTraceparent(%q) = %v %v %v, propagation.TraceContext: %v %v %v", h, tid, sid, flags, want.TraceID(), want.SpanID(), want.TraceFlags())
		}
	})
}

// FuzzFormatTraceparent: a span context formats as
// propagation.TraceContext writes it, and parses back to itself.
func FuzzFormatTraceparent(f *testing.F) {
	f.Add([]byte("0123456789abcdef"), []byte("01234567"), byte(1))
	f.Add([]byte("0123456789abcdef"), []byte("01234567"), byte(0xff))
	f.Fuzz(func(t *testing.T, tidb, sidb []byte, flags byte) {
		var scc trace.SpanContextConfig
		copy(scc.TraceID[:], tidb)
		copy(scc.SpanID[:], sidb)
		scc.TraceFlags = trace.TraceFlags(flags)
		sc := trace.NewSpanContext(scc)
		want := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), want)
		if !sc.IsValid() {
			if len(want) != 0 {
				t.Fatalf("propagation.TraceContext wrote %v for an invalid span context", want)
			}
			return
		}
		var tp traceparent
		got := tp.format(sc)
		if got != want[keyTraceparent] {
			t.Fatalf("format = %q, propagation.TraceContext: %q", got, want[keyTraceparent])
		}
		tid, sid, fl, ok := parseTraceparent(got)
		if !ok || tid != sc.TraceID() || sid != sc.SpanID() || fl != sc.TraceFlags()&(trace.FlagsSampled|trace.FlagsRandom) {
			t.Fatalf("parseTraceparent(%q) = %v %v %v %v, want %v %v %v", got, tid, sid, fl, ok, sc.TraceID(), sc.SpanID(), sc.TraceFlags())
		}
	})
}

// TestW3CMatchesPropagator: the default propagation without a carrier
// writes the metadata the SDK's propagators (W3C trace context and
// baggage) write, and reads back what they read: ids, flags, tracestate
// and baggage; without baggage when it stands for
// propagation.TraceContext alone.
func TestW3CMatchesPropagator(t *testing.T) {
	ts, err := trace.ParseTraceState("vendor=a1,other=b2")
	if err != nil {
		t.Fatal(err)
	}
	m1, err := baggage.NewMember("tenant", "t1")
	if err != nil {
		t.Fatal(err)
	}
	bag, err := baggage.New(m1)
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x0a, 0xf7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14},
		SpanID:     trace.SpanID{0xb7, 1, 2, 3, 4, 5, 6, 7},
		TraceFlags: trace.FlagsSampled,
	})
	composite := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	for _, tc := range []struct {
		name string
		fast w3c
		prop propagation.TextMapPropagator
		ctx  context.Context
	}{
		{"span", w3c{baggage: true}, composite, trace.ContextWithSpanContext(context.Background(), sc)},
		{"tracestate+baggage", w3c{baggage: true}, composite, baggage.ContextWithBaggage(trace.ContextWithSpanContext(context.Background(), sc.WithTraceState(ts)), bag)},
		{"baggage alone", w3c{baggage: true}, composite, baggage.ContextWithBaggage(context.Background(), bag)},
		{"unsampled", w3c{baggage: true}, composite, trace.ContextWithSpanContext(context.Background(), sc.WithTraceFlags(0))},
		{"nothing", w3c{baggage: true}, composite, context.Background()},
		{"trace context alone", w3c{}, propagation.TraceContext{}, baggage.ContextWithBaggage(trace.ContextWithSpanContext(context.Background(), sc.WithTraceState(ts)), bag)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := propagation.MapCarrier{}
			tc.prop.Inject(tc.ctx, want)
			var tp traceparent
			kv := tc.fast.inject(tc.ctx, &tp, nil)
			got := map[string]string{}
			for i := 0; i+1 < len(kv); i += 2 {
				got[kv[i]] = kv[i+1]
			}
			if !maps.Equal(got, map[string]string(want)) {
				t.Fatalf("inject wrote %v, the propagator %v", got, want)
			}

			md := runtime.OutgoingMetadata(runtime.AppendMetadata(context.Background(), kv...))
			wantCtx := tc.prop.Extract(context.Background(), want)
			gotCtx := tc.fast.extract(context.Background(), md)
			if g, w := trace.SpanContextFromContext(gotCtx), trace.SpanContextFromContext(wantCtx); !g.Equal(w) {
				t.Errorf("extract read %v, the propagator %v", g, w)
			}
			if g, w := baggage.FromContext(gotCtx).String(), baggage.FromContext(wantCtx).String(); g != w {
				t.Errorf("extract read baggage %q, the propagator %q", g, w)
			}
		})
	}
}
