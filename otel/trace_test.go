package wizotel_test

import (
	"context"
	"testing"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	"github.com/wizardmesh/wizard/runtime"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// mathA serves Sum by asking B to record it (an untyped call), so that a
// call to it crosses two nodes.
type mathA struct {
	mathv1.UnimplementedMathServiceHandler
	n *runtime.Node
}

func (a mathA) Sum(ctx context.Context, req *mathv1.SumRequest) (*mathv1.SumResponse, error) {
	var s float64
	for _, v := range req.GetValues() {
		s += v
	}
	if _, err := a.n.ActE(ctx, "role:store,cmd:log", map[string]any{"sum": s}); err != nil {
		return nil, err
	}
	return &mathv1.SumResponse{Sum: s}, nil
}

func (a mathA) Divide(ctx context.Context, req *mathv1.DivideRequest) (*mathv1.DivideResponse, error) {
	if req.GetDivisor() == 0 {
		return nil, runtime.Errorf(runtime.CodeInvalidArgument, "division by zero")
	}
	return &mathv1.DivideResponse{Quotient: req.GetDividend() / req.GetDivisor()}, nil
}

// chain is caller → A → B, each node instrumented with tm.
type chain struct {
	caller, a, b *runtime.Node
	math         mathv1.MathServiceClient
}

func newChain(t *testing.T, tm *telemetry, tr transport) *chain {
	t.Helper()
	c := &chain{}
	c.b = server(t, tr(t), nil, tm.option())
	if err := c.b.Add("role:store,cmd:log", func(ctx context.Context, r runtime.Request) (any, error) {
		return map[string]any{"logged": true}, nil
	}); err != nil {
		t.Fatal(err)
	}
	c.a = server(t, tr(t), []string{c.b.Addr()}, tm.option())
	if err := mathv1.RegisterMathServiceHandler(c.a, mathA{n: c.a}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c.a, "role:store,cmd:log", 1)
	c.caller = client(t, tr(t), []string{c.a.Addr()}, tm.option())
	waitFor(t, c.caller, "role:math,cmd:sum", 1)
	var err error
	if c.math, err = mathv1.NewMathServiceClient(c.caller); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestChainTrace: a typed call from caller to A, whose handler makes an
// untyped call to B, is one trace: caller's call span, A's server span
// (child of the call span, across the network), A's call span (child of
// A's server span) and B's server span (child of A's call span), with the
// RPC conventions' names and attributes. A call whose one attempt
// answered has no attempt span: the call's span names the target.
func TestChainTrace(t *testing.T) {
	for _, tc := range []struct {
		name string
		tr   transport
	}{{"tcp", tcpTransport}, {"quic", quicTransport}} {
		t.Run(tc.name, func(t *testing.T) {
			tm := newTelemetry(t)
			c := newChain(t, tm, tc.tr)
			tm.spans.Reset() // the catalogs' pulls are not calls through the interceptors, but be sure
			res, err := c.math.Sum(callCtx(t), &mathv1.SumRequest{Values: []float64{1, 2}})
			if err != nil || res.GetSum() != 3 {
				t.Fatalf("Sum = %v, %v", res, err)
			}
			spans := tm.ended()
			// Each call had one attempt, which answered: it has no span
			// of its own.
			if len(spans) != 4 {
				t.Fatalf("%d spans, want 4: %v", len(spans), names(spans))
			}
			const sumProc = mathv1.MathServiceSumProcedure
			const logPattern = "cmd:log,role:store"
			callSum := one(t, spans, sumProc, trace.SpanKindClient)
			serveSum := one(t, spans, sumProc, trace.SpanKindServer)
			callLog := one(t, spans, logPattern, trace.SpanKindClient)
			serveLog := one(t, spans, logPattern, trace.SpanKindServer)

			for _, s := range spans {
				if s.SpanContext.TraceID() != callSum.SpanContext.TraceID() {
					t.Errorf("span %s %q is in trace %v, not the caller's %v", s.SpanKind, s.Name, s.SpanContext.TraceID(), callSum.SpanContext.TraceID())
				}
				if got := attr(s, "rpc.system.name"); got != "wizard" {
					t.Errorf("span %s %q: rpc.system.name %q, want wizard", s.SpanKind, s.Name, got)
				}
				if s.Status.Code != codes.Unset {
					t.Errorf("span %s %q: status %v, want unset", s.SpanKind, s.Name, s.Status)
				}
			}
			if callSum.Parent.IsValid() {
				t.Errorf("the caller's span has a parent: %v", callSum.Parent)
			}
			for _, pc := range []struct {
				what          string
				child, parent tracetest.SpanStub
			}{
				{"A's server span", serveSum, callSum},
				{"A's call span", callLog, serveSum},
				{"B's server span", serveLog, callLog},
			} {
				if !childOf(pc.child, pc.parent) {
					t.Errorf("%s (%s) is a child of %v, want %q's %v", pc.what, pc.child.Name, pc.child.Parent.SpanID(), pc.parent.Name, pc.parent.SpanContext.SpanID())
				}
			}
			for _, w := range []struct {
				s         tracetest.SpanStub
				key, want string
			}{
				{callSum, "rpc.method", sumProc},
				{callSum, "rpc.response.status_code", "ok"},
				{callSum, "wizard.target", c.a.ID()},
				{callSum, "wizard.pattern", "cmd:sum,role:math"},
				{callSum, "server.address", "127.0.0.1"},
				{serveSum, "rpc.method", sumProc},
				{serveSum, "rpc.response.status_code", "ok"},
				{serveSum, "wizard.pattern", "cmd:sum,role:math"},
				{serveSum, "wizard.caller", c.caller.ID()},
				{serveSum, "network.peer.address", "127.0.0.1"},
				{serveSum, "network.transport", tc.name},
				{callLog, "rpc.method", logPattern},
				{callLog, "wizard.target", c.b.ID()},
				{serveLog, "wizard.caller", c.a.ID()},
				{serveLog, "rpc.method", logPattern},
			} {
				if got := attr(w.s, w.key); got != w.want {
					t.Errorf("span %s %q: %s = %q, want %q", w.s.SpanKind, w.s.Name, w.key, got, w.want)
				}
			}
		})
	}
}

// TestErrorStatus: a handler's invalid_argument makes the client span an
// error with the code, and leaves the server span's status unset (the
// caller's fault, as the RPC conventions have it) with the code.
func TestErrorStatus(t *testing.T) {
	tm := newTelemetry(t)
	c := newChain(t, tm, tcpTransport)
	_, err := c.math.Divide(callCtx(t), &mathv1.DivideRequest{Dividend: 1})
	if runtime.CodeOf(err) != runtime.CodeInvalidArgument {
		t.Fatalf("Divide by zero: %v, want invalid_argument", err)
	}
	spans := tm.ended()
	const proc = mathv1.MathServiceDivideProcedure
	cl := one(t, spans, proc, trace.SpanKindClient)
	srv := one(t, spans, proc, trace.SpanKindServer)
	if cl.Status.Code != codes.Error || attr(cl, "rpc.response.status_code") != "invalid_argument" || attr(cl, "error.type") != "invalid_argument" {
		t.Errorf("client span: status %v, code %q, error.type %q; want an error, invalid_argument", cl.Status, attr(cl, "rpc.response.status_code"), attr(cl, "error.type"))
	}
	if srv.Status.Code != codes.Unset || attr(srv, "rpc.response.status_code") != "invalid_argument" {
		t.Errorf("server span: status %v, code %q; want unset, invalid_argument", srv.Status, attr(srv, "rpc.response.status_code"))
	}
}

// TestForwardedMetadataTrace: a handler that forwards the metadata it
// received (its caller's traceparent among it) still makes its own call a
// child of its own span: the interceptor's trace context replaces the
// forwarded one, and the other keys go on.
func TestForwardedMetadataTrace(t *testing.T) {
	tm := newTelemetry(t)
	b := server(t, tcpTransport(t), nil, tm.option())
	var got runtime.Metadata
	if err := b.Add("role:b", func(ctx context.Context, r runtime.Request) (any, error) {
		got = runtime.IncomingMetadata(ctx)
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	a := server(t, tcpTransport(t), []string{b.Addr()}, tm.option())
	if err := a.Add("role:a", func(ctx context.Context, r runtime.Request) (any, error) {
		return a.ActE(runtime.WithMetadata(ctx, runtime.IncomingMetadata(ctx)), "role:b", nil)
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, a, "role:b", 1)
	cl := client(t, tcpTransport(t), []string{a.Addr()}, tm.option())
	waitFor(t, cl, "role:a", 1)
	if _, err := cl.ActE(runtime.AppendMetadata(callCtx(t), "tenant", "t1"), "role:a", nil); err != nil {
		t.Fatal(err)
	}
	spans := tm.ended()
	callB := one(t, spans, "role:b", trace.SpanKindClient)
	serveB := one(t, spans, "role:b", trace.SpanKindServer)
	if !childOf(serveB, callB) {
		t.Errorf("B's server span is a child of %v, want A's call span %v", serveB.Parent.SpanID(), callB.SpanContext.SpanID())
	}
	if n := len(got.Values("traceparent")); n != 1 || got.Get("tenant") != "t1" {
		t.Errorf("B received %d traceparent values and tenant %q; want 1 and t1 (metadata %v)", n, got.Get("tenant"), got)
	}
}
