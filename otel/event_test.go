package wizotel_test

import (
	"context"
	"slices"
	"testing"

	wizotel "github.com/wizardmesh/wizard/otel"
	"github.com/wizardmesh/wizard/runtime"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

const (
	placed        = "event:placed,role:order" // as emitted, and as canonical
	placedPattern = "event:placed"            // the subscriptions'
)

// mesh is an emitter and two subscribers over TCP, each subscriber the
// one member of its group (billing, shipping), all instrumented with one
// telemetry.
type mesh struct {
	emitter, billing, shipping *runtime.Node
}

func newMesh(t *testing.T, tm *telemetry, billing, shipping runtime.Handler) *mesh {
	t.Helper()
	m := &mesh{}
	m.billing = server(t, tcpTransport(t), nil, tm.option())
	m.shipping = server(t, tcpTransport(t), nil, tm.option())
	for _, s := range []struct {
		n     *runtime.Node
		group string
		h     runtime.Handler
	}{{m.billing, "billing", billing}, {m.shipping, "shipping", shipping}} {
		if err := s.n.Subscribe(placedPattern, s.group, s.h); err != nil {
			t.Fatal(err)
		}
	}
	m.emitter = client(t, tcpTransport(t), []string{m.billing.Addr(), m.shipping.Addr()}, tm.option())
	if err := m.emitter.WaitForSubscribers(callCtx(t), placed, "billing", "shipping"); err != nil {
		t.Fatal(err)
	}
	return m
}

func took(context.Context, runtime.Request) (any, error) { return nil, nil }

// TestEventTrace: an event emitted with the node's Emit to two groups
// over TCP, in a span of the caller's, is one trace: a PRODUCER span per
// group's delivery, the caller's span's child, and on each subscriber a
// CONSUMER span, the child of its group's delivery across the network
// and linked to it, with the messaging conventions' attributes. The
// emitter counts a delivery per group; each subscriber, its run by
// group; no call is counted or traced.
func TestEventTrace(t *testing.T) {
	tm := newTelemetry(t)
	m := newMesh(t, tm, took, took)
	tm.spans.Reset()
	ctx, parent := tm.tp.Tracer("test").Start(callCtx(t), "request")
	d, err := m.emitter.Emit(ctx, placed, map[string]any{"id": 7})
	parent.End()
	if err != nil {
		t.Fatalf("Emit: %v", err)
	}
	slices.Sort(d.Took)
	if want := []string{"billing", "shipping"}; !slices.Equal(d.Took, want) {
		t.Fatalf("Emit took %v, want %v", d.Took, want)
	}
	spans := tm.ended()
	if len(spans) != 5 {
		t.Fatalf("%d spans, want 5: %v", len(spans), names(spans))
	}
	req := one(t, spans, "request", trace.SpanKindInternal)
	for _, g := range []struct {
		group string
		node  *runtime.Node
	}{{"billing", m.billing}, {"shipping", m.shipping}} {
		send := one(t, spans, "emit "+g.group, trace.SpanKindProducer)
		process := one(t, spans, "process "+g.group, trace.SpanKindConsumer)
		if !childOf(send, req) {
			t.Errorf("the delivery to %s is a child of %v, want the caller's %v", g.group, send.Parent.SpanID(), req.SpanContext.SpanID())
		}
		if !childOf(process, send) || !process.Parent.IsRemote() {
			t.Errorf("%s's consumer span is a child of %v (remote %v), want its delivery's %v across the network", g.group, process.Parent.SpanID(), process.Parent.IsRemote(), send.SpanContext.SpanID())
		}
		if !linksTo(process, send) {
			t.Errorf("%s's consumer span has links %v, want one to its delivery's span %v", g.group, process.Links, send.SpanContext.SpanID())
		}
		for _, w := range []struct {
			s         tracetest.SpanStub
			key, want string
		}{
			{send, "messaging.system", "wizard"},
			{send, "messaging.operation.type", "send"},
			{send, "messaging.operation.name", "emit"},
			{send, "messaging.destination.name", g.group},
			{send, "wizard.pattern", placedPattern}, // the pairs the subscriptions test
			{send, "wizard.target", g.node.ID()},
			{send, "rpc.response.status_code", "ok"},
			{process, "messaging.system", "wizard"},
			{process, "messaging.operation.type", "process"},
			{process, "messaging.consumer.group.name", g.group},
			{process, "wizard.pattern", placedPattern},
			{process, "wizard.caller", m.emitter.ID()},
			{process, "network.transport", "tcp"},
			{process, "rpc.response.status_code", "ok"},
		} {
			if got := attr(w.s, w.key); got != w.want {
				t.Errorf("span %s %q: %s = %q, want %q", w.s.SpanKind, w.s.Name, w.key, got, w.want)
			}
		}
		if attr(send, "wizard.attempt") != "" || len(send.Events) != 0 {
			t.Errorf("the delivery to %s: attempt %q, events %v; want its first attempt taken, without events", g.group, attr(send, "wizard.attempt"), send.Events)
		}
	}
	for _, s := range spans {
		if s.SpanContext.TraceID() != req.SpanContext.TraceID() {
			t.Errorf("span %s %q is in trace %v, not the caller's", s.SpanKind, s.Name, s.SpanContext.TraceID())
		}
		if s.Status.Code != codes.Unset {
			t.Errorf("span %s %q: status %v, want unset", s.SpanKind, s.Name, s.Status)
		}
	}

	rm := tm.collect(t)
	for _, g := range []string{"billing", "shipping"} {
		by := attribute.String("messaging.consumer.group.name", g)
		if n, _ := sum(rm, "wizard.client.events.delivered", by); n != 1 {
			t.Errorf("wizard.client.events.delivered{%s} = %d, want 1", g, n)
		}
		if n, _ := histCount(rm, "wizard.server.event.duration", by, attribute.String("wizard.pattern", placedPattern), attribute.String("rpc.response.status_code", "ok")); n != 1 {
			t.Errorf("wizard.server.event.duration{%s} count = %d, want 1", g, n)
		}
	}
	for _, name := range []string{"wizard.client.events.missed", "wizard.client.event.attempts.passed"} {
		if _, ok := sum(rm, name); ok {
			t.Errorf("%s has a point; every group took the event at once", name)
		}
	}
	noCalls(t, spans, rm)
}

// noCalls fails t if spans or rm show a call: a client or server span,
// or a point of the calls' instruments.
func noCalls(t *testing.T, spans tracetest.SpanStubs, rm metricdata.ResourceMetrics) {
	t.Helper()
	for _, s := range spans {
		if s.SpanKind == trace.SpanKindClient || s.SpanKind == trace.SpanKindServer {
			t.Errorf("span %s %q: an event traced as a call", s.SpanKind, s.Name)
		}
	}
	for _, name := range []string{"rpc.client.call.duration", "rpc.server.call.duration"} {
		if _, ok := histCount(rm, name); ok {
			t.Errorf("%s has a point: an event counted as a call", name)
		}
	}
	for _, name := range []string{"wizard.client.calls.active", "wizard.server.calls.active", "wizard.client.retries", "wizard.client.attempts.refused"} {
		if _, ok := sum(rm, name); ok {
			t.Errorf("%s has a point: an event counted as a call", name)
		}
	}
}

// linksTo reports whether s has a link to p.
func linksTo(s, p tracetest.SpanStub) bool {
	return slices.ContainsFunc(s.Links, func(l sdktrace.Link) bool {
		return l.SpanContext.TraceID() == p.SpanContext.TraceID() && l.SpanContext.SpanID() == p.SpanContext.SpanID()
	})
}

// TestEventMissed: a group whose subscription fails misses the event: its
// delivery's span and its consumer's are errors, and the emitter counts
// the group's miss by code beside the other group's delivery. Without a
// span of the caller's, each delivery starts a trace, which its
// consumer joins.
func TestEventMissed(t *testing.T) {
	tm := newTelemetry(t)
	fail := func(context.Context, runtime.Request) (any, error) {
		return nil, runtime.Errorf(runtime.CodeFailedPrecondition, "no such order")
	}
	m := newMesh(t, tm, took, fail)
	tm.spans.Reset()
	d, err := m.emitter.Emit(callCtx(t), placed, nil)
	if runtime.CodeOf(err) != runtime.CodeFailedPrecondition || !slices.Equal(d.Missed, []string{"shipping"}) {
		t.Fatalf("Emit = %+v, %v; want shipping missed with failed_precondition", d, err)
	}
	spans := tm.ended()
	send := one(t, spans, "emit shipping", trace.SpanKindProducer)
	if send.Parent.IsValid() {
		t.Errorf("shipping's delivery has parent %v; the emit had no span", send.Parent.SpanID())
	}
	if send.Status.Code != codes.Error || attr(send, "rpc.response.status_code") != "failed_precondition" || attr(send, "error.type") != "failed_precondition" {
		t.Errorf("shipping's delivery: status %v, code %q; want an error, failed_precondition", send.Status, attr(send, "rpc.response.status_code"))
	}
	process := one(t, spans, "process shipping", trace.SpanKindConsumer)
	if process.Status.Code != codes.Error || attr(process, "error.type") != "failed_precondition" {
		t.Errorf("shipping's consumer span: status %v, error.type %q; want an error, failed_precondition", process.Status, attr(process, "error.type"))
	}
	if !childOf(process, send) || !linksTo(process, send) {
		t.Errorf("shipping's consumer span: parent %v, links %v; want its delivery's span %v", process.Parent.SpanID(), process.Links, send.SpanContext.SpanID())
	}
	if billing := one(t, spans, "emit billing", trace.SpanKindProducer); billing.SpanContext.TraceID() == send.SpanContext.TraceID() {
		t.Error("the two deliveries share a trace without a span of the caller's")
	}

	rm := tm.collect(t)
	shipping := attribute.String("messaging.consumer.group.name", "shipping")
	if n, _ := sum(rm, "wizard.client.events.missed", shipping, attribute.String("rpc.response.status_code", "failed_precondition")); n != 1 {
		t.Errorf("wizard.client.events.missed{shipping, failed_precondition} = %d, want 1", n)
	}
	if n, _ := sum(rm, "wizard.client.events.delivered", attribute.String("messaging.consumer.group.name", "billing")); n != 1 {
		t.Errorf("wizard.client.events.delivered{billing} = %d, want 1", n)
	}
	if _, ok := sum(rm, "wizard.client.events.delivered", shipping); ok {
		t.Error("wizard.client.events.delivered{shipping} has a point")
	}
	if n, _ := histCount(rm, "wizard.server.event.duration", shipping, attribute.String("rpc.response.status_code", "failed_precondition")); n != 1 {
		t.Errorf("wizard.server.event.duration{shipping, failed_precondition} count = %d, want 1", n)
	}
	noCalls(t, spans, rm)
}

// TestBroadcastTrace: a broadcast to two nodes over TCP is a "broadcast"
// PRODUCER span per node, the caller's span's child, and a consumer on
// each node, the child of its node's delivery and linked to it; the
// emitter counts two deliveries of a broadcast.
func TestBroadcastTrace(t *testing.T) {
	tm := newTelemetry(t)
	m := newMesh(t, tm, took, took)
	tm.spans.Reset()
	ctx, parent := tm.tp.Tracer("test").Start(callCtx(t), "request")
	d, err := m.emitter.Broadcast(ctx, placed, nil)
	parent.End()
	if err != nil || len(d.Took) != 2 {
		t.Fatalf("Broadcast = %+v, %v; want two nodes", d, err)
	}
	spans := tm.ended()
	req := one(t, spans, "request", trace.SpanKindInternal)
	sends := find(spans, "broadcast", trace.SpanKindProducer)
	if len(sends) != 2 {
		t.Fatalf("%d broadcast deliveries, want 2: %v", len(sends), names(spans))
	}
	for _, s := range sends {
		if !childOf(s, req) || attr(s, "messaging.operation.name") != "broadcast" || attr(s, "messaging.destination.name") != "" {
			t.Errorf("delivery to %v: parent %v, operation %q, destination %q; want the caller's span, broadcast, none", attr(s, "wizard.target"), s.Parent.SpanID(), attr(s, "messaging.operation.name"), attr(s, "messaging.destination.name"))
		}
	}
	for _, g := range []struct {
		group string
		node  *runtime.Node
	}{{"billing", m.billing}, {"shipping", m.shipping}} {
		i := slices.IndexFunc(sends, func(s tracetest.SpanStub) bool { return attr(s, "wizard.target") == g.node.ID() })
		if i < 0 {
			t.Errorf("no delivery went to %s's node %s", g.group, g.node.ID())
			continue
		}
		process := one(t, spans, "process "+g.group, trace.SpanKindConsumer)
		if !childOf(process, sends[i]) || !linksTo(process, sends[i]) {
			t.Errorf("%s's consumer span: parent %v, links %v; want its node's delivery %v", g.group, process.Parent.SpanID(), process.Links, sends[i].SpanContext.SpanID())
		}
	}
	rm := tm.collect(t)
	if n, _ := sum(rm, "wizard.client.events.delivered", attribute.Bool("wizard.event.broadcast", true)); n != 2 {
		t.Errorf("wizard.client.events.delivered{broadcast} = %d, want 2", n)
	}
	noCalls(t, spans, rm)
}

// TestLocalEvent: a subscription of the emitting node runs in process,
// through the call interceptors as a remote one does: its delivery is a
// PRODUCER span, the caller's span's child, and its consumer span the
// delivery's child, linked to it; both are counted by group. A failing
// local subscription is its group's miss.
func TestLocalEvent(t *testing.T) {
	tm := newTelemetry(t)
	n := newNode(t, tm.option())
	if err := n.Subscribe(placedPattern, "audit", took); err != nil {
		t.Fatal(err)
	}
	if err := n.Subscribe(placedPattern, "fraud", func(context.Context, runtime.Request) (any, error) {
		return nil, runtime.Errorf(runtime.CodeInvalidArgument, "no total")
	}); err != nil {
		t.Fatal(err)
	}
	ctx, parent := tm.tp.Tracer("test").Start(callCtx(t), "request")
	d, err := n.Emit(ctx, placed, map[string]any{"id": 7})
	parent.End()
	if runtime.CodeOf(err) != runtime.CodeInvalidArgument || !slices.Equal(d.Took, []string{"audit"}) {
		t.Fatalf("Emit = %+v, %v; want audit took it, fraud missed it", d, err)
	}
	spans := tm.ended()
	if len(spans) != 5 {
		t.Fatalf("%d spans, want 5: %v", len(spans), names(spans))
	}
	req := one(t, spans, "request", trace.SpanKindInternal)
	for _, g := range []string{"audit", "fraud"} {
		send := one(t, spans, "emit "+g, trace.SpanKindProducer)
		process := one(t, spans, "process "+g, trace.SpanKindConsumer)
		if !childOf(send, req) {
			t.Errorf("%s's delivery: parent %v, want the caller's span %v", g, send.Parent.SpanID(), req.SpanContext.SpanID())
		}
		if !childOf(process, send) || !linksTo(process, send) {
			t.Errorf("%s's consumer span: parent %v, links %v; want its delivery's span %v", g, process.Parent.SpanID(), process.Links, send.SpanContext.SpanID())
		}
		if got := attr(send, "wizard.pattern"); got != "event:placed,id:7,role:order" {
			t.Errorf("%s's delivery: wizard.pattern %q, want the event's pairs", g, got)
		}
	}
	if fraud := one(t, spans, "emit fraud", trace.SpanKindProducer); fraud.Status.Code != codes.Error || attr(fraud, "rpc.response.status_code") != "invalid_argument" {
		t.Errorf("fraud's delivery: status %v, code %q; want an error, invalid_argument", fraud.Status, attr(fraud, "rpc.response.status_code"))
	}
	rm := tm.collect(t)
	if n, _ := sum(rm, "wizard.client.events.delivered", attribute.String("messaging.consumer.group.name", "audit")); n != 1 {
		t.Errorf("wizard.client.events.delivered{audit} = %d, want 1", n)
	}
	if n, _ := sum(rm, "wizard.client.events.missed", attribute.String("messaging.consumer.group.name", "fraud"), attribute.String("rpc.response.status_code", "invalid_argument")); n != 1 {
		t.Errorf("wizard.client.events.missed{fraud, invalid_argument} = %d, want 1", n)
	}
	if n, _ := histCount(rm, "wizard.server.event.duration", attribute.String("messaging.consumer.group.name", "audit")); n != 1 {
		t.Errorf("wizard.server.event.duration{audit} count = %d, want 1", n)
	}
	noCalls(t, spans, rm)
}

// TestObserveDurable: the figures a durable engine reports per group are
// the durable instruments' points at each collection, until stopped.
func TestObserveDurable(t *testing.T) {
	tm := newTelemetry(t)
	figures := []wizotel.DurableStats{
		{Group: "billing", Delivered: 12, Redelivered: 2, DeadLettered: 1, Pending: 5},
		{Group: "shipping", Delivered: 10},
	}
	stop, err := wizotel.ObserveDurable(tm.mp, func(context.Context) ([]wizotel.DurableStats, error) { return figures, nil })
	if err != nil {
		t.Fatal(err)
	}
	rm := tm.collect(t)
	for _, f := range figures {
		by := attribute.String("messaging.consumer.group.name", f.Group)
		for name, want := range map[string]uint64{
			"wizard.event.durable.delivered":     f.Delivered,
			"wizard.event.durable.redelivered":   f.Redelivered,
			"wizard.event.durable.dead_lettered": f.DeadLettered,
			"wizard.event.durable.pending":       f.Pending,
		} {
			if got, ok := sum(rm, name, by); !ok || got != int64(want) {
				t.Errorf("%s{%s} = %d (%v), want %d", name, f.Group, got, ok, want)
			}
		}
	}
	figures[0].Pending = 0 // drained
	if got, _ := sum(tm.collect(t), "wizard.event.durable.pending", attribute.String("messaging.consumer.group.name", "billing")); got != 0 {
		t.Errorf("pending{billing} after draining = %d, want 0", got)
	}
	stop()
	if _, ok := sum(tm.collect(t), "wizard.event.durable.delivered"); ok {
		t.Error("the durable figures are still reported after stop")
	}
	if _, err := wizotel.ObserveDurable(tm.mp, nil); err == nil {
		t.Error("ObserveDurable with a nil function: no error")
	}
}

// TestEmitInHandler: a handler that emits, in a call made in process,
// makes the deliveries (run side by side) children of its server span,
// their consumers children of the deliveries, and leaves the call's own
// span and measurements as they were: its target is none of the
// subscribers, and the deliveries count in no call's instruments.
func TestEmitInHandler(t *testing.T) {
	tm := newTelemetry(t)
	m := newMesh(t, tm, took, took)
	if err := m.emitter.Add("role:order,cmd:place", func(ctx context.Context, _ runtime.Request) (any, error) {
		_, err := m.emitter.Emit(ctx, placed, nil)
		return map[string]any{"placed": true}, err
	}); err != nil {
		t.Fatal(err)
	}
	tm.spans.Reset()
	if _, err := m.emitter.Act(callCtx(t), "role:order,cmd:place", nil); err != nil {
		t.Fatal(err)
	}
	spans := tm.ended()
	const place = "cmd:place,role:order"
	call := one(t, spans, place, trace.SpanKindClient)
	serve := one(t, spans, place, trace.SpanKindServer)
	if !childOf(serve, call) {
		t.Errorf("call %v → serve (parent %v): not a chain", call.SpanContext.SpanID(), serve.Parent.SpanID())
	}
	for _, g := range []string{"billing", "shipping"} {
		send := one(t, spans, "emit "+g, trace.SpanKindProducer)
		if !childOf(send, serve) || !childOf(one(t, spans, "process "+g, trace.SpanKindConsumer), send) {
			t.Errorf("%s's delivery is not a child of the handler's span, or its consumer of it", g)
		}
	}
	if got := attr(call, "wizard.target"); got != "" {
		t.Errorf("the call's span names target %q: an event's delivery counted as its attempt", got)
	}
	rm := tm.collect(t)
	for _, name := range []string{"rpc.client.call.duration", "rpc.server.call.duration"} {
		if n, _ := histCount(rm, name); n != 1 {
			t.Errorf("%s count = %d, want 1: the call alone", name, n)
		}
	}
	if _, ok := sum(rm, "wizard.client.retries"); ok {
		t.Error("the deliveries counted as the call's retries")
	}
}

// TestEventPassedOver: a member that refuses a delivery (over its
// in-flight limit) is passed over: the attempt counts as passed by group
// and code and is a refused event of the delivery's span, and with no
// other member the group misses the event: the span is an error and the
// miss is counted.
func TestEventPassedOver(t *testing.T) {
	tm := newTelemetry(t)
	billing := server(t, tcpTransport(t), nil, tm.option(), runtime.WithMaxInFlight(1))
	release, blocked := make(chan struct{}), make(chan struct{})
	if err := billing.Add("role:block", func(context.Context, runtime.Request) (any, error) {
		close(blocked)
		<-release
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := billing.Subscribe(placedPattern, "billing", took); err != nil {
		t.Fatal(err)
	}
	emitter := client(t, tcpTransport(t), []string{billing.Addr()}, tm.option())
	if err := emitter.WaitForSubscribers(callCtx(t), placed, "billing"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, emitter, "role:block", 1)
	done := make(chan error, 1)
	go func() {
		_, err := emitter.Act(callCtx(t), "role:block", nil)
		done <- err
	}()
	<-blocked // billing's one slot is taken
	tm.spans.Reset()
	d, err := emitter.Emit(callCtx(t), placed, nil)
	close(release)
	if err == nil || !slices.Equal(d.Missed, []string{"billing"}) {
		t.Fatalf("Emit = %+v, %v; want billing missed", d, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	send := one(t, tm.ended(), "emit billing", trace.SpanKindProducer)
	if send.Status.Code != codes.Error || !hasEvent(send, "refused") {
		t.Errorf("the refused delivery's span: status %v, events %v; want an error with a refused event", send.Status, send.Events)
	}
	rm := tm.collect(t)
	by := attribute.String("messaging.consumer.group.name", "billing")
	if n, _ := sum(rm, "wizard.client.event.attempts.passed", by, attribute.String("rpc.response.status_code", runtime.CodeOf(err).String())); n != 1 {
		t.Errorf("wizard.client.event.attempts.passed{billing, %s} = %d, want 1", runtime.CodeOf(err), n)
	}
	if n, _ := sum(rm, "wizard.client.events.missed", by, attribute.String("rpc.response.status_code", runtime.CodeOf(err).String())); n != 1 {
		t.Errorf("wizard.client.events.missed{billing, %s} = %d, want 1", runtime.CodeOf(err), n)
	}
	if _, ok := sum(rm, "wizard.client.events.delivered", by); ok {
		t.Error("wizard.client.events.delivered{billing} has a point")
	}
}
