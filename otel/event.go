package wizotel

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Events ([runtime.Node.Emit], [runtime.Node.Broadcast]) follow the
// OpenTelemetry messaging conventions, with messaging.system=wizard:
//
//   - Each delivery of an event to a group (to a node, for a broadcast),
//     local or remote, goes through the node's call interceptors: the
//     call interceptor makes it a PRODUCER span "emit <group>"
//     ("broadcast"), a child of the emitter's span, whose trace context
//     the delivery's metadata carries, and counts it by group and
//     outcome. The observer's attempts of a remote delivery are events
//     and attributes of that span, as a call's are of its client span.
//   - Each subscription that runs on the event is a CONSUMER span
//     "process <group>" on its node, a child of its group's delivery
//     span, across the network or in process, with a link to it: links
//     are set when a span starts, so the consumers link to the producer
//     rather than the other way round.
//
// Events count in none of the calls' instruments.

// The names of the events' instruments and attributes.
const (
	metricEventDelivered = "wizard.client.events.delivered"
	metricEventMissed    = "wizard.client.events.missed"
	metricEventPassed    = "wizard.client.event.attempts.passed"
	metricEventDuration  = "wizard.server.event.duration"

	keyGroup     = semconv.MessagingConsumerGroupNameKey
	keyBroadcast = attribute.Key("wizard.event.broadcast")
)

var (
	messagingSystem = semconv.MessagingSystemKey.String(system)
	producerKind    = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}
)

// eventMetrics are the events' instruments: the emitting side's by
// group, the subscriber's duration by group and subscription.
type eventMetrics struct {
	delivered, missed, passed metric.Int64Counter
	duration                  metric.Float64Histogram

	mu   sync.RWMutex
	sets map[eventKey]*eventOpts
}

// eventOpts are the options of measurements with one set of attributes,
// made once: recording with them allocates nothing.
type eventOpts struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

// eventKey names a set of an event measurement's attributes.
type eventKey struct {
	group     string // "" for a broadcast's
	broadcast bool
	pattern   string // the subscription's, for the duration
	code      runtime.Code
	hasCode   bool
}

func newEventMetrics(meter metric.Meter) (*eventMetrics, error) {
	m := &eventMetrics{}
	var errs [4]error
	m.delivered, errs[0] = meter.Int64Counter(metricEventDelivered, metric.WithUnit("{delivery}"),
		metric.WithDescription("The deliveries of events a node made that a member took (ran without error, or was handed with NoReply), by group; a broadcast's by wizard.event.broadcast."))
	m.missed, errs[1] = meter.Int64Counter(metricEventMissed, metric.WithUnit("{delivery}"),
		metric.WithDescription("The deliveries of events a node made that failed once sent (the handler failed, the answer was lost, the time ran out), by group and code."))
	m.passed, errs[2] = meter.Int64Counter(metricEventPassed, metric.WithUnit("{attempt}"),
		metric.WithDescription("The attempts of a node's event deliveries that a member refused or that could not be sent, after which the node tries another member, by group and code."))
	m.duration, errs[3] = meter.Float64Histogram(metricEventDuration, metric.WithUnit("s"),
		metric.WithDescription("The duration of the subscriptions a node ran on events, by group, subscription pattern and code; its count is the events handled."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	return m, errors.Join(errs[:]...)
}

// opts returns the measurement options of k's attributes, kept (at most
// maxCachedSets) so that measurements make them once.
func (m *eventMetrics) opts(k eventKey) *eventOpts {
	m.mu.RLock()
	o, ok := m.sets[k]
	m.mu.RUnlock()
	if ok {
		return o
	}
	attrs := []attribute.KeyValue{messagingSystem}
	if k.broadcast {
		attrs = append(attrs, keyBroadcast.Bool(true))
	} else {
		attrs = append(attrs, keyGroup.String(k.group))
	}
	if k.pattern != "" {
		attrs = append(attrs, keyPattern.String(k.pattern))
	}
	if k.hasCode {
		attrs = append(attrs, keyCode.String(k.code.String()))
	}
	set := metric.WithAttributeSet(attribute.NewSet(attrs...))
	o = &eventOpts{add: []metric.AddOption{set}, record: []metric.RecordOption{set}}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.sets) < maxCachedSets {
		if m.sets == nil {
			m.sets = make(map[eventKey]*eventOpts)
		}
		m.sets[k] = o
	}
	return o
}

// delivery is an event's delivery to a group (to a node, for a
// broadcast) while the call interceptor runs it: its PRODUCER span (nil
// when tracing is off), what the observer learns of its attempts, and the
// room of the traceparent its metadata carries. It is the delivery's ctx
// too, under callStateKey: so a delivery hides the state of any call
// whose handler emitted the event (the deliveries run beside each other
// and count in none of that call's measurements), and a call made under
// it (by a local subscription) hides the delivery in turn.
type delivery struct {
	context.Context
	span trace.Span
	tp   traceparent

	// Of the delivery's attempts, made one after the other on the
	// delivery's goroutine (a local delivery has none):
	target  *runtime.Target // of the last attempt
	attempt int             // the last attempt's number
}

// Value returns the delivery itself under callStateKey.
func (d *delivery) Value(key any) any {
	if key == (callStateKey{}) {
		return d
	}
	return d.Context.Value(key)
}

// deliveryOf returns the delivery ctx is of, or nil.
func deliveryOf(ctx context.Context) *delivery {
	d, _ := ctx.Value(callStateKey{}).(*delivery)
	return d
}

// deliveryName is the span name of a delivery to group: the messaging
// conventions' "{operation} {destination}"; "broadcast" for a
// broadcast's ("" group).
func deliveryName(group string) string {
	if group == "" {
		return "broadcast"
	}
	return "emit " + group
}

// deliver is the call interceptor's part for an event's delivery
// (c.Event): a PRODUCER span "emit <group>", a child of the emitter's,
// whose trace context the delivery's metadata carries to the group's
// subscriptions, and the delivery counted by group and outcome. It is
// no client call: none of the calls' instruments counts it.
func (in *instrumentation) deliver(ctx context.Context, next runtime.Invoker, c *runtime.Call) (runtime.Result, error) {
	d := &delivery{Context: ctx}
	ctx = d
	if in.tracer != nil {
		ctx, d.span = in.tracer.Start(ctx, deliveryName(c.Group), producerKind...)
		ctx = in.inject(ctx, &d.tp)
	}
	returned := false
	defer func() {
		if !returned {
			p := recover()
			in.endDelivery(ctx, d, c, panicked(d.span, "delivery to "+deliveryName(c.Group), p))
			repanic(p)
		}
	}()
	res, err := next(ctx, c)
	returned = true
	in.endDelivery(ctx, d, c, err)
	return res, err
}

// endDelivery counts a delivery that ended with err, taken (nil) or
// missed, and ends its span.
func (in *instrumentation) endDelivery(ctx context.Context, d *delivery, c *runtime.Call, err error) {
	code := runtime.CodeOf(err)
	if m := in.m; m != nil {
		k := eventKey{group: c.Group, broadcast: c.Group == ""}
		if err == nil {
			m.events.delivered.Add(ctx, 1, m.events.opts(k).add...)
		} else {
			k.code, k.hasCode = code, true
			m.events.missed.Add(ctx, 1, m.events.opts(k).add...)
		}
	}
	span := d.span
	if span == nil {
		return
	}
	if span.IsRecording() {
		buf := getAttrs()
		defer putAttrs(buf)
		op := semconv.MessagingOperationNameKey.String("emit")
		if c.Group == "" {
			op = semconv.MessagingOperationNameKey.String("broadcast")
		}
		attrs := append(buf[:0], messagingSystem, semconv.MessagingOperationTypeSend, op)
		if c.Group != "" {
			attrs = append(attrs, semconv.MessagingDestinationNameKey.String(c.Group))
		}
		attrs = append(attrs, keyPattern.String(c.Pattern.String()), keyCode.String(code.String()))
		if d.attempt > 1 {
			attrs = append(attrs, keyAttempt.Int(d.attempt)) // the members before it refused or were not reached
		}
		if err != nil {
			attrs = append(attrs, semconv.ErrorTypeKey.String(code.String()))
			span.SetStatus(codes.Error, err.Error())
		}
		if d.target != nil {
			attrs = append(attrs, in.targetAttrs(d.target)...)
		}
		span.SetAttributes(attrs...) // once: each call takes the span's lock
	}
	span.End()
}

// deliveryAttemptStart notes an attempt of a remote delivery on its
// delivery: its target, and a retry (after members that refused or were
// not reached) as an event of the delivery's span.
func (in *instrumentation) deliveryAttemptStart(ctx context.Context, a runtime.Attempt) context.Context {
	d := deliveryOf(ctx)
	if d == nil {
		return ctx
	}
	d.target, d.attempt = a.Target, a.N
	if a.N > 1 && d.span != nil && d.span.IsRecording() {
		d.span.AddEvent("retry", trace.WithAttributes(append(in.targetAttrs(a.Target), keyAttempt.Int(a.N))...))
	}
	return ctx
}

// deliveryAttemptEnd counts an attempt a member refused or that was not
// sent as passed over (the node tries another member), an event of the
// delivery's span. The delivery's outcome is the interceptor's
// (endDelivery), which sees it whatever the attempts were.
func (in *instrumentation) deliveryAttemptEnd(ctx context.Context, a runtime.Attempt, r runtime.AttemptResult) {
	if !r.Refused && !errors.Is(r.Err, runtime.ErrNotSent) {
		return
	}
	if m := in.m; m != nil {
		k := eventKey{group: a.Group, broadcast: a.Group == "", code: r.Code, hasCode: true}
		m.events.passed.Add(ctx, 1, m.events.opts(k).add...)
	}
	if d := deliveryOf(ctx); d != nil && d.span != nil && d.span.IsRecording() {
		name := "refused"
		if !r.Refused {
			name = "not_sent"
		}
		d.span.AddEvent(name, trace.WithAttributes(append(in.targetAttrs(a.Target), keyAttempt.Int(a.N), keyCode.String(r.Code.String()))...))
	}
}

// consumer is the handler interceptor's part for a subscription that runs
// on an event (req.Group() != ""): a CONSUMER span, the child of the
// trace context the delivery carried and linked to it, and the event's
// duration by group and subscription.
func (in *instrumentation) consumer(ctx context.Context, next runtime.Handler, req runtime.Request) (any, error) {
	group, pat := req.Group(), req.Pattern().String()
	var span trace.Span
	if in.tracer != nil {
		ctx = in.extract(ctx, runtime.IncomingMetadata(ctx))
		opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
		ctx, span = in.tracer.Start(ctx, "process "+group, opts...)
	}
	start := time.Now()
	returned := false
	defer func() {
		if !returned {
			p := recover()
			in.endConsumer(ctx, span, req, group, pat, start, panicked(span, "subscription "+pat+" of "+group, p))
			repanic(p)
		}
	}()
	res, err := next(ctx, req)
	returned = true
	in.endConsumer(ctx, span, req, group, pat, start, err)
	return res, err
}

// endConsumer measures a subscription's run on an event that ended with
// err and ends its span: any error is the event's failure here, which
// the emitter learns as its group's miss.
func (in *instrumentation) endConsumer(ctx context.Context, span trace.Span, req runtime.Request, group, pat string, start time.Time, err error) {
	code := runtime.CodeOf(err)
	if m := in.m; m != nil {
		m.events.duration.Record(ctx, time.Since(start).Seconds(), m.events.opts(eventKey{group: group, pattern: pat, code: code, hasCode: true}).record...)
	}
	if span == nil {
		return
	}
	if span.IsRecording() {
		src := req.Source()
		attrs := []attribute.KeyValue{messagingSystem, semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationNameKey.String("process"), keyGroup.String(group),
			semconv.MessagingDestinationNameKey.String(group), keyPattern.String(pat),
			keyCaller.String(src.Node), keyCode.String(code.String())}
		if src.Transport != "" {
			attrs = append(attrs, semconv.NetworkTransportKey.String(src.Transport))
		}
		attrs = append(attrs, in.peerAttrs(src.Addr)...)
		if err != nil {
			attrs = append(attrs, semconv.ErrorTypeKey.String(code.String()))
			span.SetStatus(codes.Error, err.Error())
		}
		span.SetAttributes(attrs...)
	}
	span.End()
}
