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
//   - Each delivery of an event to a member of a group is an attempt of a
//     remote call for the observer (runtime.Attempt.Event): a PRODUCER
//     span "emit <group>" ("broadcast" for a broadcast), a child of the
//     emitter's span, with messaging.operation.type=send and
//     messaging.destination.name=<group>, and the emitting side's
//     counters by group.
//   - [Emit] and [Broadcast] wrap the node's: a PRODUCER span "emit
//     <pattern>" covering every delivery, whose trace context travels
//     in the deliveries' metadata. (The node fixes a delivery's metadata
//     before its attempts, so an attempt's span cannot travel itself.)
//   - Each subscription that runs on the event is a CONSUMER span
//     "process <group>" on the serving node, a child of the trace context
//     the delivery carried, with a link to it: links are set when a span
//     starts, so the consumers link to the producer rather than the other
//     way round; a trace viewer shows the emit and every consumer.
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
	keyTook      = attribute.Key("wizard.event.took")
	keyMissed    = attribute.Key("wizard.event.missed")
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

// eventAttempt is the ctx of a delivery attempt: it carries the
// attempt's span (nil when tracing is off) to AttemptEnd and the
// attempt's refeeds, and hides the state of any call whose handler
// emitted the event, so that the delivery counts in none of that call's
// measurements and, run beside the other groups' deliveries, touches
// none of its state.
type eventAttempt struct {
	context.Context
	span trace.Span
}

type eventAttemptKey struct{}

func (ea *eventAttempt) Value(key any) any {
	switch key {
	case eventAttemptKey{}:
		return ea
	case callStateKey{}:
		return nil
	}
	return ea.Context.Value(key)
}

func eventAttemptOf(ctx context.Context) *eventAttempt {
	ea, _ := ctx.Value(eventAttemptKey{}).(*eventAttempt)
	return ea
}

// deliveryName is the span name of a delivery to group: the messaging
// conventions' "{operation} {destination}".
func deliveryName(a runtime.Attempt) string {
	if a.Group == "" {
		return "broadcast"
	}
	return "emit " + a.Group
}

// eventAttemptStart starts the PRODUCER span of a delivery attempt, a
// child of the emitter's span.
func (in *instrumentation) eventAttemptStart(ctx context.Context, a runtime.Attempt) context.Context {
	if in.tracer == nil {
		return &eventAttempt{Context: ctx}
	}
	ctx, span := in.tracer.Start(ctx, deliveryName(a), producerKind...)
	if span.IsRecording() {
		op := "emit"
		if a.Group == "" {
			op = "broadcast"
		}
		attrs := []attribute.KeyValue{messagingSystem, semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationNameKey.String(op), keyPattern.String(a.Pattern.String())}
		if a.Group != "" {
			attrs = append(attrs, semconv.MessagingDestinationNameKey.String(a.Group))
		}
		if a.N > 1 {
			attrs = append(attrs, keyAttempt.Int(a.N)) // the members before it refused or were not reached
		}
		span.SetAttributes(append(attrs, in.targetAttrs(a.Target)...)...)
	}
	return &eventAttempt{Context: ctx, span: span}
}

// eventAttemptEnd counts a delivery attempt by its outcome and ends its
// span. An attempt refused or not sent is passed over (the node tries
// another member); any other is the group's delivery, taken or missed.
func (in *instrumentation) eventAttemptEnd(ctx context.Context, a runtime.Attempt, r runtime.AttemptResult) {
	passed := r.Refused || errors.Is(r.Err, runtime.ErrNotSent)
	if m := in.m; m != nil {
		k := eventKey{group: a.Group, broadcast: a.Group == ""}
		switch {
		case passed:
			k.code, k.hasCode = r.Code, true
			m.events.passed.Add(ctx, 1, m.events.opts(k).add...)
		case r.Code == runtime.CodeOK && r.Err == nil:
			m.events.delivered.Add(ctx, 1, m.events.opts(k).add...)
		default:
			k.code, k.hasCode = r.Code, true
			m.events.missed.Add(ctx, 1, m.events.opts(k).add...)
		}
	}
	ea := eventAttemptOf(ctx)
	if ea == nil || ea.span == nil {
		return
	}
	span := ea.span
	if span.IsRecording() {
		code := keyCode.String(r.Code.String())
		span.SetAttributes(code)
		switch {
		case r.Refused:
			span.AddEvent("refused", trace.WithAttributes(code))
			span.SetStatus(codes.Error, "refused: "+r.Code.String())
		case r.Err != nil:
			span.RecordError(r.Err)
			span.SetStatus(codes.Error, r.Err.Error())
		case r.Code != runtime.CodeOK:
			span.SetAttributes(semconv.ErrorTypeKey.String(r.Code.String()))
			span.SetStatus(codes.Error, r.Code.String())
		}
	}
	span.End()
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

// nodes are the instrumentations of the nodes that run, for [Emit] and
// [Broadcast].
var nodes sync.Map // *runtime.Node → *instrumentation

// Emit is n.Emit ([runtime.Node.Emit]) in a PRODUCER span "emit
// <pattern>" (pattern as given, without the message's fields) whose trace
// context travels in the event's metadata: the consumers' spans on every
// group's member are its children, linked to it, and one trace shows the
// event from its emit to each subscription that ran. The span records
// the groups that took the event and those that missed it. Without an
// instrumented node ([Instrument] with tracing) it is n.Emit alone.
func Emit(ctx context.Context, n *runtime.Node, pattern string, msg any, opts ...runtime.CallOption) (runtime.Delivery, error) {
	return emit(ctx, n, pattern, msg, opts, false)
}

// Broadcast is n.Broadcast ([runtime.Node.Broadcast]) in a PRODUCER span
// "broadcast <pattern>", as [Emit] is n.Emit's: the consumers on every
// node are its children, linked to it.
func Broadcast(ctx context.Context, n *runtime.Node, pattern string, msg any, opts ...runtime.CallOption) (runtime.Delivery, error) {
	return emit(ctx, n, pattern, msg, opts, true)
}

func emit(ctx context.Context, n *runtime.Node, pattern string, msg any, opts []runtime.CallOption, broadcast bool) (runtime.Delivery, error) {
	do, op := n.Emit, "emit"
	if broadcast {
		do, op = n.Broadcast, "broadcast"
	}
	v, _ := nodes.Load(n)
	in, _ := v.(*instrumentation)
	if in == nil || in.tracer == nil {
		return do(ctx, pattern, msg, opts...)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, span := in.tracer.Start(ctx, op+" "+pattern, producerKind...)
	var tp traceparent
	ctx = in.inject(ctx, &tp)
	d, err := do(ctx, pattern, msg, opts...)
	if span.IsRecording() {
		code := runtime.CodeOf(err)
		attrs := []attribute.KeyValue{messagingSystem, semconv.MessagingOperationTypeCreate,
			semconv.MessagingOperationNameKey.String(op), keyPattern.String(pattern),
			keyCode.String(code.String())}
		if d.Took != nil {
			attrs = append(attrs, keyTook.StringSlice(d.Took))
		}
		if d.Missed != nil {
			attrs = append(attrs, keyMissed.StringSlice(d.Missed))
		}
		if err != nil {
			attrs = append(attrs, semconv.ErrorTypeKey.String(code.String()))
			span.SetStatus(codes.Error, err.Error())
		}
		span.SetAttributes(attrs...)
	}
	span.End()
	return d, err
}
