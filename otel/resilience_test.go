package wizotel_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/lb"
	"github.com/wizardmesh/wizard/runtime/pattern"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestRefusedRetried: s1 is at its in-flight limit (one call held by
// another node), so it
// refuses a call without running it and the caller retries on s2. The
// call's span has the refused and retry events and two attempts, the
// first refused (resource_exhausted) by s1, the second answered by s2;
// s1 shows the refusal as a server span of its own, in the same trace;
// the counters count the refusal and the retry by procedure and code.
func TestRefusedRetried(t *testing.T) {
	tm := newTelemetry(t)
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	defer close(release)
	s1 := server(t, tcpTransport(t), nil, tm.option(), runtime.WithMaxInFlight(1))
	s2 := server(t, tcpTransport(t), nil, tm.option())
	work := func(ctx context.Context, r runtime.Request) (any, error) { return "done", nil }
	for _, s := range []*runtime.Node{s1, s2} {
		if err := s.Add("role:work", work); err != nil {
			t.Fatal(err)
		}
	}
	if err := s1.Add("role:hold", func(ctx context.Context, r runtime.Request) (any, error) {
		held <- struct{}{}
		<-release
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	ring := runtime.WithBalancer(func(pattern.Pattern) runtime.Balancer { return lb.NewRing[*runtime.Target]() })
	cl := client(t, tcpTransport(t), []string{s1.Addr(), s2.Addr()}, tm.option(), ring)
	waitFor(t, cl, "role:work", 2)
	// Another node holds s1's one slot: the refusal is then the node's
	// (over its limit), not the transport's (over the caller's share of
	// it, which the server's observer does not see).
	holder := client(t, tcpTransport(t), []string{s1.Addr()})
	waitFor(t, holder, "role:hold", 1)
	go func() { _, _ = holder.ActE(context.Background(), "role:hold", nil) }()
	<-held
	// The ring alternates: within two calls one goes to s1 first.
	for i := 0; cl.Stats().Retries == 0; i++ {
		if i == 4 {
			t.Fatalf("no call was retried in %d calls: stats %+v", i, cl.Stats())
		}
		if res, err := cl.ActE(callCtx(t), "role:work", nil); err != nil || res.Value() != "done" {
			t.Fatalf("call: %v, %v", res.Value(), err)
		}
	}

	spans := tm.ended()
	var call tracetest.SpanStub
	for _, s := range find(spans, "role:work", trace.SpanKindClient) {
		if hasEvent(s, "retry") {
			call = s
		}
	}
	if !hasEvent(call, "retry") || !hasEvent(call, "refused") {
		t.Fatalf("no call span with retry and refused events: %v", names(spans))
	}
	if call.Status.Code != codes.Unset {
		t.Errorf("the retried call's span: status %v, want unset (it succeeded)", call.Status)
	}
	var attempts []tracetest.SpanStub
	for _, s := range find(spans, "Attempt.role:work", trace.SpanKindInternal) {
		if childOf(s, call) {
			attempts = append(attempts, s)
		}
	}
	if len(attempts) != 2 {
		t.Fatalf("%d attempts of the retried call, want 2", len(attempts))
	}
	first, second := attempts[0], attempts[1]
	if attr(first, "wizard.attempt") == "2" {
		first, second = second, first
	}
	for _, w := range []struct {
		s         tracetest.SpanStub
		key, want string
	}{
		{first, "wizard.attempt", "1"},
		{first, "wizard.target", s1.ID()},
		{first, "rpc.response.status_code", "resource_exhausted"},
		{second, "wizard.attempt", "2"},
		{second, "wizard.target", s2.ID()},
		{second, "rpc.response.status_code", "ok"},
	} {
		if got := attr(w.s, w.key); got != w.want {
			t.Errorf("attempt %s: %s = %q, want %q", attr(w.s, "wizard.attempt"), w.key, got, w.want)
		}
	}
	if first.Status.Code != codes.Error || !hasEvent(first, "refused") || second.Status.Code != codes.Unset {
		t.Errorf("attempts' statuses %v (refused event %v), %v; want the first an error, refused, the second unset", first.Status, hasEvent(first, "refused"), second.Status)
	}
	var refusal tracetest.SpanStub
	for _, s := range find(spans, "role:work", trace.SpanKindServer) {
		if hasEvent(s, "refused") {
			refusal = s
		}
	}
	if !childOf(refusal, call) || attr(refusal, "rpc.response.status_code") != "resource_exhausted" {
		t.Errorf("s1's refusal: span %q (parent %v, code %q), want a server span child of the call's %v with code resource_exhausted",
			refusal.Name, refusal.Parent.SpanID(), attr(refusal, "rpc.response.status_code"), call.SpanContext.SpanID())
	}

	rm := tm.collect(t)
	method := attribute.String("rpc.method", "role:work")
	exhausted := attribute.String("rpc.response.status_code", "resource_exhausted")
	for _, w := range []struct {
		name  string
		attrs []attribute.KeyValue
	}{
		{"wizard.client.attempts.refused", []attribute.KeyValue{method, exhausted}},
		{"wizard.client.retries", []attribute.KeyValue{method}},
		{"wizard.server.refused", []attribute.KeyValue{method, exhausted}},
		{"wizard.node.shed", []attribute.KeyValue{attribute.String("wizard.node.id", s1.ID())}},
		{"wizard.node.retries", []attribute.KeyValue{attribute.String("wizard.node.id", cl.ID())}},
	} {
		if got, ok := sum(rm, w.name, w.attrs...); !ok || got != 1 {
			t.Errorf("%s%v = %d (%v), want 1", w.name, w.attrs, got, ok)
		}
	}
	if got, ok := sum(rm, "wizard.peers", attribute.String("wizard.node.id", cl.ID()), attribute.String("wizard.peer.state", "connected")); !ok || got != 2 {
		t.Errorf("the caller's connected peers: %d (%v), want 2", got, ok)
	}
}

// TestRefeedDeduplicated: the connection drops while a call runs on the
// server; the caller sends it again (a refeed) and the server answers the
// copy from its de-duplication table, running the handler once. The
// call's span and its attempt have the refeed event, the server shows the
// copy as a server span with the duplicate event, and the counters count
// both.
func TestRefeedDeduplicated(t *testing.T) {
	tm := newTelemetry(t)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	srv := server(t, tcpTransport(t), nil, tm.option())
	if err := srv.Add("role:pay", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		select {
		case <-release:
			return "paid", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}); err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, srv.Addr())
	cl := client(t, tcpTransport(t), []string{proxy.addr()}, tm.option())
	waitFor(t, cl, "role:pay", 1)
	done := make(chan error, 1)
	go func() {
		res, err := cl.ActE(callCtx(t), "role:pay", nil)
		if err == nil && res.Value() != "paid" {
			err = fmt.Errorf("answer %v, want paid", res.Value())
		}
		done <- err
	}()
	<-started
	proxy.cut()
	until(t, "the call arrives again", func() bool { return srv.Stats().Duplicates == 1 })
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("call: %v", err)
	}
	if len(started) != 0 {
		t.Fatal("the handler ran twice")
	}

	spans := tm.ended()
	call := one(t, spans, "role:pay", trace.SpanKindClient)
	attempt := one(t, spans, "Attempt.role:pay", trace.SpanKindInternal)
	if !hasEvent(call, "refeed") || !hasEvent(attempt, "refeed") || !childOf(attempt, call) {
		t.Errorf("call span refeed %v, attempt refeed %v (child %v); want both, the attempt the call's child", hasEvent(call, "refeed"), hasEvent(attempt, "refeed"), childOf(attempt, call))
	}
	served := find(spans, "role:pay", trace.SpanKindServer)
	var ran, dup int
	for _, s := range served {
		if !childOf(s, call) {
			t.Errorf("server span %v is not the call's child", s.SpanContext.SpanID())
		}
		if hasEvent(s, "duplicate") {
			dup++
		} else {
			ran++
		}
	}
	if ran != 1 || dup != 1 {
		t.Errorf("%d server spans of the handler, %d of duplicates; want 1 and 1", ran, dup)
	}
	rm := tm.collect(t)
	method := attribute.String("rpc.method", "role:pay")
	for _, w := range []struct {
		name  string
		attrs []attribute.KeyValue
	}{
		{"wizard.client.refeeds", []attribute.KeyValue{method}},
		{"wizard.server.duplicates", []attribute.KeyValue{method}},
		{"wizard.node.refeeds", []attribute.KeyValue{attribute.String("wizard.node.id", cl.ID())}},
		{"wizard.node.duplicates", []attribute.KeyValue{attribute.String("wizard.node.id", srv.ID())}},
	} {
		if got, ok := sum(rm, w.name, w.attrs...); !ok || got != 1 {
			t.Errorf("%s%v = %d (%v), want 1", w.name, w.attrs, got, ok)
		}
	}
	if n, ok := histCount(rm, "rpc.server.call.duration", method, attribute.String("rpc.response.status_code", "ok")); !ok || n != 1 {
		t.Errorf("server durations of role:pay: %d (%v), want 1", n, ok)
	}
}
