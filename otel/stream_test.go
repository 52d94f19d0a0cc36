package wizotel_test

import (
	"context"
	"errors"
	"io"
	"testing"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	"github.com/wizardmesh/wizard/runtime"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// countPattern is the pattern the count handler is added with, and
// countProc its canonical form: the procedure of its spans and metrics.
const (
	countPattern = "role:ticker,cmd:count"
	countProc    = "cmd:count,role:ticker"
)

// count serves a server stream: it receives {"n": n}, waits for release
// if there is one (after telling entered), sends n messages, and ends
// the stream with end.
func count(entered, release chan struct{}, end error) runtime.Handler {
	return runtime.NewStreamHandler(func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
		req, err := s.Recv()
		if err != nil {
			return err
		}
		if release != nil {
			entered <- struct{}{}
			<-release
		}
		n, _ := req.Get("n").(float64)
		for i := range int(n) {
			if err := s.Send(map[string]any{"i": i}); err != nil {
				return err
			}
		}
		return end
	})
}

// openCount opens a stream to countPattern on n with ctx and asks for
// want messages; read receives them all.
func openCount(t *testing.T, ctx context.Context, n *runtime.Node, want int) *countStream {
	t.Helper()
	st, err := n.OpenStream(ctx, countPattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Send(map[string]any{"n": want}); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	return &countStream{st}
}

type countStream struct {
	st *runtime.ClientStream[any, runtime.Result]
}

// read receives the stream's messages until its end, and returns how
// many and the end (nil for io.EOF).
func (c *countStream) read() (int, error) {
	got := 0
	for {
		if _, err := c.st.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return got, err
		}
		got++
	}
}

// TestStreamTrace: a remote stream is a client span on the caller and a
// server span on the serving node, its child across the network, in the
// caller's trace: both named by the stream's procedure, marked
// wizard.stream, with the messages each side sent and received and the
// stream's code.
func TestStreamTrace(t *testing.T) {
	for _, tc := range []struct {
		name string
		tr   transport
	}{{"tcp", tcpTransport}, {"quic", quicTransport}} {
		t.Run(tc.name, func(t *testing.T) {
			tm := newTelemetry(t)
			srv := server(t, tc.tr(t), nil, tm.option())
			if err := srv.Add(countPattern, count(nil, nil, nil)); err != nil {
				t.Fatal(err)
			}
			cl := client(t, tc.tr(t), []string{srv.Addr()}, tm.option())
			waitFor(t, cl, countPattern, 1)
			ctx, root := tm.tp.Tracer("test").Start(callCtx(t), "caller")
			got, err := openCount(t, ctx, cl, 3).read()
			root.End()
			if err != nil || got != 3 {
				t.Fatalf("the stream gave %d messages, then %v; want 3, then its end", got, err)
			}
			spans := tm.ended()
			if len(spans) != 3 {
				t.Fatalf("%d spans, want 3 (the caller's, the stream's client and server spans): %v", len(spans), names(spans))
			}
			caller := one(t, spans, "caller", trace.SpanKindInternal)
			open := one(t, spans, countProc, trace.SpanKindClient)
			serve := one(t, spans, countProc, trace.SpanKindServer)
			if !childOf(open, caller) {
				t.Errorf("the stream's client span is a child of %v, want the caller's span %v", open.Parent.SpanID(), caller.SpanContext.SpanID())
			}
			if !childOf(serve, open) {
				t.Errorf("the stream's server span is a child of %v in trace %v, want the client span %v in %v",
					serve.Parent.SpanID(), serve.SpanContext.TraceID(), open.SpanContext.SpanID(), open.SpanContext.TraceID())
			}
			for _, w := range []struct {
				side string
				get  func(string) string
				want map[string]string
			}{
				{"client", func(k string) string { return attr(open, k) }, map[string]string{
					"rpc.system.name": "wizard", "rpc.method": countProc, "wizard.pattern": countProc,
					"rpc.response.status_code": "ok", "wizard.stream": "true",
					"wizard.stream.messages_sent": "1", "wizard.stream.messages_received": "3",
					"wizard.target": srv.ID(), "server.address": "127.0.0.1",
				}},
				{"server", func(k string) string { return attr(serve, k) }, map[string]string{
					"rpc.system.name": "wizard", "rpc.method": countProc, "wizard.pattern": countProc,
					"rpc.response.status_code": "ok", "wizard.stream": "true",
					"wizard.stream.messages_sent": "3", "wizard.stream.messages_received": "1",
				}},
			} {
				for k, v := range w.want {
					if g := w.get(k); g != v {
						t.Errorf("%s span: %s = %q, want %q", w.side, k, g, v)
					}
				}
			}
			if open.Status.Code != codes.Unset || serve.Status.Code != codes.Unset {
				t.Errorf("statuses: client %v, server %v; want unset", open.Status, serve.Status)
			}
		})
	}
}

// TestStreamErrorStatus: a stream its handler ends with invalid_argument
// makes the client span an error with the code, and leaves the server
// span's status unset (the caller's fault) with the code; the messages
// sent before the end are counted.
func TestStreamErrorStatus(t *testing.T) {
	tm := newTelemetry(t)
	srv := server(t, tcpTransport(t), nil, tm.option())
	if err := srv.Add(countPattern, count(nil, nil, runtime.Errorf(runtime.CodeInvalidArgument, "too many"))); err != nil {
		t.Fatal(err)
	}
	cl := client(t, tcpTransport(t), []string{srv.Addr()}, tm.option())
	waitFor(t, cl, countPattern, 1)
	got, err := openCount(t, callCtx(t), cl, 2).read()
	if got != 2 || runtime.CodeOf(err) != runtime.CodeInvalidArgument {
		t.Fatalf("the stream gave %d messages, then %v; want 2, then invalid_argument", got, err)
	}
	spans := tm.ended()
	open := one(t, spans, countProc, trace.SpanKindClient)
	serve := one(t, spans, countProc, trace.SpanKindServer)
	if open.Status.Code != codes.Error || attr(open, "rpc.response.status_code") != "invalid_argument" || attr(open, "error.type") != "invalid_argument" {
		t.Errorf("client span: status %v, code %q, error.type %q; want an error, invalid_argument", open.Status, attr(open, "rpc.response.status_code"), attr(open, "error.type"))
	}
	if serve.Status.Code != codes.Unset || attr(serve, "rpc.response.status_code") != "invalid_argument" {
		t.Errorf("server span: status %v, code %q; want unset, invalid_argument", serve.Status, attr(serve, "rpc.response.status_code"))
	}
	if attr(open, "wizard.stream.messages_received") != "2" || attr(serve, "wizard.stream.messages_sent") != "2" {
		t.Errorf("messages: client received %q, server sent %q; want 2 and 2", attr(open, "wizard.stream.messages_received"), attr(serve, "wizard.stream.messages_sent"))
	}
}

// TestStreamMetrics: a remote stream counts as open on both sides while
// its handler runs, and no longer once it ended; its messages are
// counted by side and direction, its duration in the streams' histograms
// by code; the calls' instruments have none of it.
func TestStreamMetrics(t *testing.T) {
	tm := newTelemetry(t)
	srv := server(t, tcpTransport(t), nil, tm.option())
	entered, release := make(chan struct{}), make(chan struct{})
	if err := srv.Add(countPattern, count(entered, release, nil)); err != nil {
		t.Fatal(err)
	}
	cl := client(t, tcpTransport(t), []string{srv.Addr()}, tm.option())
	waitFor(t, cl, countPattern, 1)
	method := semconv.RPCMethodKey.String(countProc)
	open := func(t *testing.T) (cl, srv int64) {
		t.Helper()
		rm := tm.collect(t)
		cl, okc := sum(rm, "wizard.client.streams.active", method)
		srv, oks := sum(rm, "wizard.server.streams.active", method)
		if !okc || !oks {
			t.Fatalf("open streams observed: client %v, server %v; want both", okc, oks)
		}
		return cl, srv
	}

	st := openCount(t, callCtx(t), cl, 5)
	<-entered
	if c, s := open(t); c != 1 || s != 1 {
		t.Errorf("open streams while the handler runs: client %d, server %d; want 1 and 1", c, s)
	}
	close(release)
	if got, err := st.read(); err != nil || got != 5 {
		t.Fatalf("the stream gave %d messages, then %v; want 5, then its end", got, err)
	}
	if c, s := open(t); c != 0 || s != 0 {
		t.Errorf("open streams after the stream ended: client %d, server %d; want 0 and 0", c, s)
	}

	rm := tm.collect(t)
	for _, w := range []struct {
		name string
		want int64
	}{
		{"wizard.client.stream.messages.sent", 1},
		{"wizard.client.stream.messages.received", 5},
		{"wizard.server.stream.messages.sent", 5},
		{"wizard.server.stream.messages.received", 1},
	} {
		if got, ok := sum(rm, w.name, method); !ok || got != w.want {
			t.Errorf("%s = %d (observed %v), want %d", w.name, got, ok, w.want)
		}
	}
	ok := semconv.RPCResponseStatusCodeKey.String("ok")
	for _, name := range []string{"wizard.client.stream.duration", "wizard.server.stream.duration"} {
		if n, found := histCount(rm, name, method, ok); !found || n != 1 {
			t.Errorf("%s: %d streams with code ok (observed %v), want 1", name, n, found)
		}
	}
	for _, name := range []string{"rpc.client.call.duration", "rpc.server.call.duration"} {
		if n, found := histCount(rm, name, method); found {
			t.Errorf("%s has %d calls of the stream's procedure, want none", name, n)
		}
	}
	for _, name := range []string{"wizard.client.calls.active", "wizard.server.calls.active"} {
		if v, found := sum(rm, name, method); found {
			t.Errorf("%s has the stream's procedure (%d), want none", name, v)
		}
	}
}

// TestInProcessStream: a stream to a handler of the same node has a
// server span alone, a child of its opener's span, and the serving
// side's metrics alone: it is no attempt, and call interceptors do not
// run for streams.
func TestInProcessStream(t *testing.T) {
	tm := newTelemetry(t)
	n := newNode(t, tm.option())
	if err := n.Add(countPattern, count(nil, nil, nil)); err != nil {
		t.Fatal(err)
	}
	ctx, root := tm.tp.Tracer("test").Start(callCtx(t), "caller")
	got, err := openCount(t, ctx, n, 4).read()
	root.End()
	if err != nil || got != 4 {
		t.Fatalf("the stream gave %d messages, then %v; want 4, then its end", got, err)
	}
	spans := tm.ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2 (the caller's, the stream's server span): %v", len(spans), names(spans))
	}
	caller := one(t, spans, "caller", trace.SpanKindInternal)
	serve := one(t, spans, countProc, trace.SpanKindServer)
	if !childOf(serve, caller) {
		t.Errorf("the server span is a child of %v, want the opener's span %v", serve.Parent.SpanID(), caller.SpanContext.SpanID())
	}
	if attr(serve, "wizard.stream") != "true" || attr(serve, "wizard.stream.messages_sent") != "4" || attr(serve, "wizard.stream.messages_received") != "1" {
		t.Errorf("server span: wizard.stream %q, sent %q, received %q; want true, 4, 1",
			attr(serve, "wizard.stream"), attr(serve, "wizard.stream.messages_sent"), attr(serve, "wizard.stream.messages_received"))
	}
	rm := tm.collect(t)
	method := semconv.RPCMethodKey.String(countProc)
	for _, w := range []struct {
		name string
		want int64
		ok   bool
	}{
		{"wizard.server.streams.active", 0, true},
		{"wizard.server.stream.messages.sent", 4, true},
		{"wizard.client.streams.active", 0, true}, // observed with the server's, by procedure
		{"wizard.client.stream.messages.sent", 0, false},
	} {
		if got, ok := sum(rm, w.name, method); ok != w.ok || got != w.want {
			t.Errorf("%s = %d (observed %v), want %d (observed %v)", w.name, got, ok, w.want, w.ok)
		}
	}
}

// TestStreamHandlerPanic: a stream handler that panics after a message
// each way ends its server span as a handler's panic does (internal, an
// exception event) with the stream's counts, is no longer counted open,
// and its caller's stream ends with internal, as does its client span.
func TestStreamHandlerPanic(t *testing.T) {
	tm := newTelemetry(t)
	srv := server(t, tcpTransport(t), nil, tm.option())
	if err := srv.Add("role:boom", runtime.NewStreamHandler(func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
		if _, err := s.Recv(); err != nil {
			return err
		}
		if err := s.Send(map[string]any{"ok": true}); err != nil {
			return err
		}
		panic("boom")
	})); err != nil {
		t.Fatal(err)
	}
	cl := client(t, tcpTransport(t), []string{srv.Addr()}, tm.option())
	waitFor(t, cl, "role:boom", 1)
	st, err := cl.OpenStream(callCtx(t), "role:boom")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Send(map[string]any{"go": true}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); runtime.CodeOf(err) != runtime.CodeInternal {
		t.Fatalf("Recv after the panic: %v, want internal", err)
	}
	spans := tm.ended()
	serve := one(t, spans, "role:boom", trace.SpanKindServer)
	checkPanicSpan(t, serve, "boom")
	if attr(serve, "wizard.stream.messages_sent") != "1" || attr(serve, "wizard.stream.messages_received") != "1" {
		t.Errorf("server span: sent %q, received %q; want 1 and 1", attr(serve, "wizard.stream.messages_sent"), attr(serve, "wizard.stream.messages_received"))
	}
	if open := one(t, spans, "role:boom", trace.SpanKindClient); open.Status.Code != codes.Error || attr(open, "rpc.response.status_code") != "internal" {
		t.Errorf("client span: status %v, code %q; want an error, internal", open.Status, attr(open, "rpc.response.status_code"))
	}
	rm := tm.collect(t)
	method := semconv.RPCMethodKey.String("role:boom")
	if v, ok := sum(rm, "wizard.server.streams.active", method); !ok || v != 0 {
		t.Errorf("server streams open after the panic: %d (observed %v), want 0", v, ok)
	}
	if n, ok := histCount(rm, "wizard.server.stream.duration", method, semconv.RPCResponseStatusCodeKey.String("internal")); !ok || n != 1 {
		t.Errorf("server streams ended with internal: %d (observed %v), want 1", n, ok)
	}
}

// TestStreamInHandler: a handler of an in-process call that opens an
// in-process stream leaves its call named by the pattern that matched it
// (the stream's match is not the call's), and the stream's server span
// is a child of the handler's.
func TestStreamInHandler(t *testing.T) {
	tm := newTelemetry(t)
	n := newNode(t, tm.option())
	if err := n.Add(countPattern, count(nil, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if err := n.Add("role:outer", func(ctx context.Context, r runtime.Request) (any, error) {
		st, err := n.OpenStream(ctx, countPattern)
		if err != nil {
			return nil, err
		}
		defer st.Close()
		if err := st.Send(map[string]any{"n": 2}); err != nil {
			return nil, err
		}
		st.CloseSend()
		got, err := (&countStream{st}).read()
		return map[string]any{"got": got}, err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.ActE(callCtx(t), "role:outer", nil); err != nil {
		t.Fatal(err)
	}
	spans := tm.ended()
	call := one(t, spans, "role:outer", trace.SpanKindClient)
	outer := one(t, spans, "role:outer", trace.SpanKindServer)
	serve := one(t, spans, countProc, trace.SpanKindServer)
	if got := attr(call, "wizard.pattern"); got != "role:outer" {
		t.Errorf("the call's wizard.pattern = %q, want role:outer", got)
	}
	if !childOf(outer, call) || !childOf(serve, outer) {
		t.Errorf("parents: the handler's span %v (want the call's %v), the stream's %v (want the handler's %v)",
			outer.Parent.SpanID(), call.SpanContext.SpanID(), serve.Parent.SpanID(), outer.SpanContext.SpanID())
	}
}

// TestTypedStreamNames: a typed stream's server span and metrics are
// named by the handler's method, its client span and metrics by the
// pattern it was opened to (the observer sees the route, not the
// client's method), as docs/observability.md says.
func TestTypedStreamNames(t *testing.T) {
	tm := newTelemetry(t)
	md := mathv1.File_wizard_examples_math_v1_math_proto.Services().ByName("MathService").Methods().ByName("Sum")
	srv := server(t, tcpTransport(t), nil, tm.option())
	if err := srv.Add(mathv1.MathServiceSumPattern, runtime.NewStreamHandler(func(ctx context.Context, s *runtime.ServerStream[*mathv1.SumRequest, *mathv1.SumResponse]) error {
		var total float64
		for {
			req, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return s.Send(&mathv1.SumResponse{Sum: total})
			}
			if err != nil {
				return err
			}
			for _, v := range req.GetValues() {
				total += v
			}
		}
	}), runtime.Method(md)); err != nil {
		t.Fatal(err)
	}
	cl := client(t, tcpTransport(t), []string{srv.Addr()}, tm.option())
	waitFor(t, cl, mathv1.MathServiceSumPattern, 1)
	c, err := runtime.NewClient[mathv1.SumRequest, mathv1.SumResponse](cl, mathv1.MathServiceSumPattern, runtime.Method(md))
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Stream(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, v := range []float64{1, 2, 3} {
		if err := st.Send(&mathv1.SumRequest{Values: []float64{v}}); err != nil {
			t.Fatal(err)
		}
	}
	st.CloseSend()
	if res, err := st.Recv(); err != nil || res.GetSum() != 6 {
		t.Fatalf("Recv = %v, %v; want a sum of 6", res, err)
	}
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("the stream's end: %v, want io.EOF", err)
	}
	spans := tm.ended()
	const pattern = "cmd:sum,role:math"
	open := one(t, spans, pattern, trace.SpanKindClient)
	serve := one(t, spans, mathv1.MathServiceSumProcedure, trace.SpanKindServer)
	if !childOf(serve, open) {
		t.Errorf("the server span is a child of %v, want the client span %v", serve.Parent.SpanID(), open.SpanContext.SpanID())
	}
	if attr(open, "wizard.stream.messages_sent") != "3" || attr(serve, "wizard.stream.messages_received") != "3" {
		t.Errorf("messages: the caller sent %q, the handler received %q; want 3 and 3", attr(open, "wizard.stream.messages_sent"), attr(serve, "wizard.stream.messages_received"))
	}
	rm := tm.collect(t)
	if v, ok := sum(rm, "wizard.client.stream.messages.sent", semconv.RPCMethodKey.String(pattern)); !ok || v != 3 {
		t.Errorf("the caller's messages sent by rpc.method %q: %d (observed %v), want 3", pattern, v, ok)
	}
	if v, ok := sum(rm, "wizard.server.stream.messages.received", semconv.RPCMethodKey.String(mathv1.MathServiceSumProcedure)); !ok || v != 3 {
		t.Errorf("the handler's messages received by rpc.method %q: %d (observed %v), want 3", mathv1.MathServiceSumProcedure, v, ok)
	}
}
