package wizotel_test

import (
	"context"
	"slices"
	"testing"

	wizotel "github.com/wizardmesh/wizard/otel"
	"github.com/wizardmesh/wizard/runtime"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
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

// TestEventTrace: an event emitted with wizotel.Emit to two groups over
// TCP is one trace: the emit's PRODUCER span, a PRODUCER span per group's
// delivery (its child), and on each subscriber a CONSUMER span, the
// child of the emit's span across the network and linked to it, with
// the messaging conventions' attributes. The emitter counts a delivery
// per group; each subscriber, its run by group.
func TestEventTrace(t *testing.T) {
	tm := newTelemetry(t)
	m := newMesh(t, tm, took, took)
	tm.spans.Reset()
	d, err := wizotel.Emit(callCtx(t), m.emitter, placed, map[string]any{"id": 7})
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
	emit := one(t, spans, "emit "+placed, trace.SpanKindProducer)
	if emit.Parent.IsValid() {
		t.Errorf("the emit's span has a parent: %v", emit.Parent)
	}
	for _, w := range []struct{ key, want string }{
		{"messaging.system", "wizard"},
		{"messaging.operation.type", "create"},
		{"messaging.operation.name", "emit"},
		{"wizard.pattern", placed},
		{"rpc.response.status_code", "ok"},
	} {
		if got := attr(emit, w.key); got != w.want {
			t.Errorf("emit span: %s = %q, want %q", w.key, got, w.want)
		}
	}
	if got := attr(emit, "wizard.event.took"); got != `["billing","shipping"]` && got != `["shipping","billing"]` {
		t.Errorf("emit span: wizard.event.took = %q, want billing and shipping", got)
	}
	for _, g := range []struct {
		group string
		node  *runtime.Node
	}{{"billing", m.billing}, {"shipping", m.shipping}} {
		send := one(t, spans, "emit "+g.group, trace.SpanKindProducer)
		process := one(t, spans, "process "+g.group, trace.SpanKindConsumer)
		if !childOf(send, emit) {
			t.Errorf("the delivery to %s is a child of %v, want the emit's %v", g.group, send.Parent.SpanID(), emit.SpanContext.SpanID())
		}
		if !childOf(process, emit) {
			t.Errorf("%s's consumer span is a child of %v, want the emit's %v (across the network)", g.group, process.Parent.SpanID(), emit.SpanContext.SpanID())
		}
		if !process.Parent.IsRemote() {
			t.Errorf("%s's consumer span's parent is not remote", g.group)
		}
		if !linksTo(process, emit) {
			t.Errorf("%s's consumer span has links %v, want one to the emit's span %v", g.group, process.Links, emit.SpanContext.SpanID())
		}
		for _, w := range []struct {
			s         tracetest.SpanStub
			key, want string
		}{
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
	}
	for _, s := range spans {
		if s.SpanContext.TraceID() != emit.SpanContext.TraceID() {
			t.Errorf("span %s %q is in trace %v, not the emit's", s.SpanKind, s.Name, s.SpanContext.TraceID())
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
	if _, ok := sum(rm, "wizard.client.events.missed"); ok {
		t.Error("wizard.client.events.missed has a point; no group missed the event")
	}
	if _, ok := histCount(rm, "rpc.server.call.duration"); ok {
		t.Error("the events counted in rpc.server.call.duration")
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
// the group's miss by code beside the other group's delivery. With
// the node's own Emit (no wizotel.Emit), the deliveries are children of
// the emitter's span and the consumers start traces of their own.
func TestEventMissed(t *testing.T) {
	tm := newTelemetry(t)
	fail := func(context.Context, runtime.Request) (any, error) {
		return nil, runtime.Errorf(runtime.CodeFailedPrecondition, "no such order")
	}
	m := newMesh(t, tm, took, fail)
	tm.spans.Reset()
	ctx, parent := tm.tp.Tracer("test").Start(callCtx(t), "request")
	d, err := m.emitter.Emit(ctx, placed, nil)
	parent.End()
	if runtime.CodeOf(err) != runtime.CodeFailedPrecondition || !slices.Equal(d.Missed, []string{"shipping"}) {
		t.Fatalf("Emit = %+v, %v; want shipping missed with failed_precondition", d, err)
	}
	spans := tm.ended()
	req := one(t, spans, "request", trace.SpanKindInternal)
	send := one(t, spans, "emit shipping", trace.SpanKindProducer)
	if !childOf(send, req) || !childOf(one(t, spans, "emit billing", trace.SpanKindProducer), req) {
		t.Error("the deliveries are not children of the emitter's span")
	}
	if send.Status.Code != codes.Error || attr(send, "rpc.response.status_code") != "failed_precondition" {
		t.Errorf("shipping's delivery: status %v, code %q; want an error, failed_precondition", send.Status, attr(send, "rpc.response.status_code"))
	}
	process := one(t, spans, "process shipping", trace.SpanKindConsumer)
	if process.Status.Code != codes.Error || attr(process, "error.type") != "failed_precondition" {
		t.Errorf("shipping's consumer span: status %v, error.type %q; want an error, failed_precondition", process.Status, attr(process, "error.type"))
	}
	if process.Parent.IsValid() || len(process.Links) != 0 {
		t.Errorf("shipping's consumer span has parent %v and links %v; the node's Emit sends no trace context", process.Parent, process.Links)
	}

	rm := tm.collect(t)
	shipping := attribute.String("messaging.consumer.group.name", "shipping")
	if n, _ := sum(rm, "wizard.client.events.missed", shipping, attribute.String("rpc.response.status_code", "failed_precondition")); n != 1 {
		t.Errorf("wizard.client.events.missed{shipping, failed_precondition} = %d, want 1", n)
	}
	if n, _ := sum(rm, "wizard.client.events.delivered", attribute.String("messaging.consumer.group.name", "billing")); n != 1 {
		t.Errorf("wizard.client.events.delivered{billing} = %d, want 1", n)
	}
	if n, _ := histCount(rm, "wizard.server.event.duration", shipping, attribute.String("rpc.response.status_code", "failed_precondition")); n != 1 {
		t.Errorf("wizard.server.event.duration{shipping, failed_precondition} count = %d, want 1", n)
	}
}

// TestBroadcastTrace: wizotel.Broadcast to two nodes over TCP is the
// broadcast's PRODUCER span, a "broadcast" delivery per node, and a
// consumer on each, its child and linked to it; the emitter counts two
// deliveries of a broadcast.
func TestBroadcastTrace(t *testing.T) {
	tm := newTelemetry(t)
	m := newMesh(t, tm, took, took)
	tm.spans.Reset()
	d, err := wizotel.Broadcast(callCtx(t), m.emitter, placed, nil)
	if err != nil || len(d.Took) != 2 {
		t.Fatalf("Broadcast = %+v, %v; want two nodes", d, err)
	}
	spans := tm.ended()
	b := one(t, spans, "broadcast "+placed, trace.SpanKindProducer)
	sends := find(spans, "broadcast", trace.SpanKindProducer)
	if len(sends) != 2 {
		t.Fatalf("%d broadcast deliveries, want 2: %v", len(sends), names(spans))
	}
	targets := []string{attr(sends[0], "wizard.target"), attr(sends[1], "wizard.target")}
	slices.Sort(targets)
	want := []string{m.billing.ID(), m.shipping.ID()}
	slices.Sort(want)
	if !slices.Equal(targets, want) {
		t.Errorf("the deliveries went to %v, want %v", targets, want)
	}
	for _, s := range sends {
		if !childOf(s, b) || attr(s, "messaging.operation.name") != "broadcast" || attr(s, "messaging.destination.name") != "" {
			t.Errorf("delivery %v: parent %v, operation %q, destination %q", attr(s, "wizard.target"), s.Parent.SpanID(), attr(s, "messaging.operation.name"), attr(s, "messaging.destination.name"))
		}
	}
	for _, g := range []string{"billing", "shipping"} {
		process := one(t, spans, "process "+g, trace.SpanKindConsumer)
		if !childOf(process, b) || !linksTo(process, b) {
			t.Errorf("%s's consumer span: parent %v, links %v; want the broadcast's span %v", g, process.Parent.SpanID(), process.Links, b.SpanContext.SpanID())
		}
	}
	rm := tm.collect(t)
	if n, _ := sum(rm, "wizard.client.events.delivered", attribute.Bool("wizard.event.broadcast", true)); n != 2 {
		t.Errorf("wizard.client.events.delivered{broadcast} = %d, want 2", n)
	}
}

// TestLocalEvent: a subscription of the emitting node runs in process:
// its consumer span is the child of the emit's span and linked to it,
// and no delivery span (no attempt) stands between.
func TestLocalEvent(t *testing.T) {
	tm := newTelemetry(t)
	n := newNode(t, tm.option())
	if err := n.Subscribe(placedPattern, "audit", took); err != nil {
		t.Fatal(err)
	}
	if _, err := wizotel.Emit(callCtx(t), n, placed, nil); err != nil {
		t.Fatal(err)
	}
	spans := tm.ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2: %v", len(spans), names(spans))
	}
	emit := one(t, spans, "emit "+placed, trace.SpanKindProducer)
	process := one(t, spans, "process audit", trace.SpanKindConsumer)
	if !childOf(process, emit) || !linksTo(process, emit) {
		t.Errorf("the consumer span: parent %v, links %v; want the emit's span %v", process.Parent.SpanID(), process.Links, emit.SpanContext.SpanID())
	}
	if n, _ := histCount(tm.collect(t), "wizard.server.event.duration", attribute.String("messaging.consumer.group.name", "audit")); n != 1 {
		t.Errorf("wizard.server.event.duration{audit} count = %d, want 1", n)
	}
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
// makes the emit a child of its server span, the deliveries (run side by
// side) children of the emit, and leaves the call's own span and
// measurements as they were: its target is none of the subscribers.
func TestEmitInHandler(t *testing.T) {
	tm := newTelemetry(t)
	m := newMesh(t, tm, took, took)
	if err := m.emitter.Add("role:order,cmd:place", func(ctx context.Context, _ runtime.Request) (any, error) {
		_, err := wizotel.Emit(ctx, m.emitter, placed, nil)
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
	emit := one(t, spans, "emit "+placed, trace.SpanKindProducer)
	if !childOf(serve, call) || !childOf(emit, serve) {
		t.Errorf("call %v → serve (parent %v) → emit (parent %v): not a chain", call.SpanContext.SpanID(), serve.Parent.SpanID(), emit.Parent.SpanID())
	}
	for _, g := range []string{"billing", "shipping"} {
		if !childOf(one(t, spans, "emit "+g, trace.SpanKindProducer), emit) || !childOf(one(t, spans, "process "+g, trace.SpanKindConsumer), emit) {
			t.Errorf("%s's delivery or consumer is not a child of the emit", g)
		}
	}
	if got := attr(call, "wizard.target"); got != "" {
		t.Errorf("the call's span names target %q: an event's delivery counted as its attempt", got)
	}
	rm := tm.collect(t)
	if n, _ := histCount(rm, "rpc.client.call.duration", attribute.String("rpc.method", place)); n != 1 {
		t.Errorf("rpc.client.call.duration{%s} count = %d, want 1", place, n)
	}
	if _, ok := sum(rm, "wizard.client.retries"); ok {
		t.Error("the deliveries counted as the call's retries")
	}
}

// TestEventPassedOver: a member that refuses a delivery (over its
// in-flight limit) is passed over: the attempt counts as passed by group
// and code, its span is an error with a refused event, and with no other
// member the group misses the event.
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
	if _, ok := sum(rm, "wizard.client.events.delivered", by); ok {
		t.Error("wizard.client.events.delivered{billing} has a point")
	}
}
