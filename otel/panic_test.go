package wizotel_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// panicLogs counts the runtime's "handler panicked" records: the panic
// reached the runtime's recovery.
type panicLogs struct{ n atomic.Int64 }

func (*panicLogs) Enabled(context.Context, slog.Level) bool { return true }
func (h *panicLogs) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "wizard: handler panicked" {
		h.n.Add(1)
	}
	return nil
}
func (h *panicLogs) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *panicLogs) WithGroup(string) slog.Handler      { return h }

// TestHandlerPanic: a handler that panics, called in process and from
// another node over TCP and QUIC, ends its server span as an error with
// the panic as an exception event, counts the call as served with
// internal (the code its caller gets) and no longer in flight; the
// caller's span ends with internal too; and the panic still reaches the
// runtime's recovery, which logs it and answers internal.
func TestHandlerPanic(t *testing.T) {
	const calls = 3
	for _, tc := range []struct {
		name string
		tr   transport // nil: in process
	}{{"in_process", nil}, {"tcp", tcpTransport}, {"quic", quicTransport}} {
		t.Run(tc.name, func(t *testing.T) {
			tm := newTelemetry(t)
			logs := &panicLogs{}
			logOpt := runtime.WithLogger(slog.New(logs))
			var srv, caller *runtime.Node
			if tc.tr == nil {
				srv = newNode(t, tm.option(), logOpt)
				caller = srv
			} else {
				srv = server(t, tc.tr(t), nil, tm.option(), logOpt)
			}
			if err := srv.Add("role:boom", func(ctx context.Context, r runtime.Request) (any, error) {
				panic("boom")
			}); err != nil {
				t.Fatal(err)
			}
			if tc.tr != nil {
				caller = client(t, tc.tr(t), []string{srv.Addr()}, tm.option())
				waitFor(t, caller, "role:boom", 1)
			}
			for range calls {
				if _, err := caller.ActE(callCtx(t), "role:boom", nil); runtime.CodeOf(err) != runtime.CodeInternal {
					t.Fatalf("ActE role:boom: %v, want internal", err)
				}
			}
			if got := logs.n.Load(); got != calls {
				t.Errorf("the runtime logged %d panics, want %d", got, calls)
			}
			spans := tm.ended()
			served := find(spans, "role:boom", trace.SpanKindServer)
			if len(served) != calls {
				t.Errorf("%d server spans ended, want %d; spans: %v", len(served), calls, names(spans))
			}
			for _, s := range served {
				checkPanicSpan(t, s, "boom")
			}
			called := find(spans, "role:boom", trace.SpanKindClient)
			if len(called) != calls {
				t.Errorf("%d client spans ended, want %d", len(called), calls)
			}
			for _, s := range called {
				if s.Status.Code != codes.Error || attr(s, "rpc.response.status_code") != "internal" {
					t.Errorf("client span: status %v, code %q; want an error, internal", s.Status, attr(s, "rpc.response.status_code"))
				}
			}
			rm := tm.collect(t)
			method := semconv.RPCMethodKey.String("role:boom")
			if n, ok := sum(rm, "wizard.server.calls.active", method); !ok || n != 0 {
				t.Errorf("server calls in flight after the calls: %d (observed %v), want 0", n, ok)
			}
			if n, _ := histCount(rm, "rpc.server.call.duration", method, semconv.RPCResponseStatusCodeKey.String("internal")); n != calls {
				t.Errorf("server calls measured as internal: %d, want %d", n, calls)
			}
		})
	}
}

// checkPanicSpan checks that s is an error span with the exception event
// of a panic with value msg, and no stack.
func checkPanicSpan(t *testing.T, s tracetest.SpanStub, msg string) {
	t.Helper()
	if s.Status.Code != codes.Error || !strings.Contains(s.Status.Description, "panicked") || attr(s, "rpc.response.status_code") != "internal" {
		t.Errorf("span %s %q: status %v, code %q; want an error that says it panicked, internal", s.SpanKind, s.Name, s.Status, attr(s, "rpc.response.status_code"))
	}
	var ev *sdktrace.Event
	for i := range s.Events {
		if s.Events[i].Name == "exception" {
			ev = &s.Events[i]
		}
	}
	if ev == nil {
		t.Fatalf("span %s %q: no exception event; events %v", s.SpanKind, s.Name, s.Events)
	}
	got := attribute.NewSet(ev.Attributes...)
	if v, _ := got.Value("exception.message"); v.AsString() != msg {
		t.Errorf("exception.message %q, want %q", v.AsString(), msg)
	}
	if v, _ := got.Value("exception.type"); v.AsString() != "string" {
		t.Errorf("exception.type %q, want string", v.AsString())
	}
	if got.HasValue("exception.stacktrace") {
		t.Errorf("the exception event carries the stack")
	}
}

// TestCallPanic: a call that panics before it is answered (here in a
// call interceptor given after Instrument's) ends its client span as an
// error with the exception event, counts the call as internal and no
// longer in flight, and goes on panicking to its caller.
func TestCallPanic(t *testing.T) {
	tm := newTelemetry(t)
	boom := func(runtime.Invoker) runtime.Invoker {
		return func(context.Context, *runtime.Call) (runtime.Result, error) { panic("interceptor") }
	}
	n := newNode(t, tm.option(), runtime.WithCallInterceptors(boom))
	if err := n.Add("role:quiet", func(context.Context, runtime.Request) (any, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	var p any
	func() {
		defer func() { p = recover() }()
		_, _ = n.ActE(callCtx(t), "role:quiet", nil)
	}()
	if p != "interceptor" {
		t.Fatalf("ActE recovered %v, want the interceptor's panic", p)
	}
	spans := tm.ended()
	checkPanicSpan(t, one(t, spans, "role:quiet", trace.SpanKindClient), "interceptor")
	rm := tm.collect(t)
	method := semconv.RPCMethodKey.String("_OTHER") // an untyped call never matched
	if n, ok := sum(rm, "wizard.client.calls.active", method); !ok || n != 0 {
		t.Errorf("client calls in flight after the call: %d (observed %v), want 0", n, ok)
	}
	if n, _ := histCount(rm, "rpc.client.call.duration", method, semconv.RPCResponseStatusCodeKey.String("internal")); n != 1 {
		t.Errorf("client calls measured as internal: %d, want 1", n)
	}
}

// TestCallFailsEarly: a call that fails before any attempt (no node
// serves its pattern) still ends its client span as an error with its
// code, and is no longer in flight.
func TestCallFailsEarly(t *testing.T) {
	tm := newTelemetry(t)
	n := newNode(t, tm.option())
	_, err := n.ActE(callCtx(t), "role:nobody", nil)
	code := runtime.CodeOf(err)
	if err == nil {
		t.Fatal("ActE role:nobody answered")
	}
	s := one(t, tm.ended(), "role:nobody", trace.SpanKindClient)
	if s.Status.Code != codes.Error || attr(s, "rpc.response.status_code") != code.String() {
		t.Errorf("client span: status %v, code %q; want an error, %s", s.Status, attr(s, "rpc.response.status_code"), code)
	}
	if n, ok := sum(tm.collect(t), "wizard.client.calls.active", semconv.RPCMethodKey.String("_OTHER")); !ok || n != 0 {
		t.Errorf("client calls in flight after the call: %d (observed %v), want 0", n, ok)
	}
}
