package wizotel

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// observer is the instrumentation's [runtime.Observer]: a span per
// attempt of a remote call, retries, refeeds, refusals and duplicates as
// span events and counters, and the node's Stats and peers as observable
// instruments.
type observer struct{ in *instrumentation }

var _ runtime.Observer = observer{}

func (o observer) Observe(n *runtime.Node) func() {
	if o.in.m == nil {
		return nil
	}
	stopNode, err := o.in.m.observeNode(n)
	if err != nil {
		otel.Handle(err)
		return nil
	}
	stopActive, err := o.in.m.observeActive()
	if err != nil {
		otel.Handle(err)
		return stopNode
	}
	return func() {
		stopNode()
		stopActive()
	}
}

// AttemptStart records a retry, names the call by the pattern that
// matched and its target, and starts the attempt's span: for the first
// attempt, only if it turns out to need one (see AttemptEnd). A stream's
// attempt starts the stream's span and measurements (streamStart); an
// event delivery's attempt is noted on the delivery's span, which the
// call interceptor made (deliveryAttemptStart).
func (o observer) AttemptStart(ctx context.Context, a runtime.Attempt) context.Context {
	if a.Stream {
		return o.in.streamStart(ctx, a)
	}
	if a.Event {
		return o.in.deliveryAttemptStart(ctx, a)
	}
	pattern := a.Pattern.String()
	st := stateOf(ctx)
	if st != nil {
		st.matched(pattern)
	}
	if a.N > 1 && o.in.m != nil {
		o.in.m.retries.Add(ctx, 1, o.in.m.by.of(procedureOf(st, pattern), 0, false).add...)
	}
	if !st.recording() {
		// A call not sampled has no attempt spans: none is started, and
		// AttemptEnd ends none.
		return ctx
	}
	st.target, st.attempt = a.Target, a.N
	if a.N == 1 {
		// Most calls have one attempt, which answers: the call's span
		// says all of it. Its span is made when it ends otherwise.
		st.firstStart, st.refeeds = time.Now(), st.refeeds[:0]
		return ctx
	}
	target := o.in.targetAttrs(a.Target)
	attempt := keyAttempt.Int(a.N)
	st.span.AddEvent("retry", trace.WithAttributes(append(target, attempt)...))
	ctx, span := o.in.tracer.Start(ctx, "Attempt."+procedureOf(st, pattern), internalKind...)
	span.SetAttributes(append(target, systemAttr, keyPattern.String(pattern), attempt)...)
	return ctx
}

// AttemptEnd counts a refusal and ends the attempt's span. The first
// attempt gets a span only now, from its start, when it did not simply
// answer: it was refused, it failed in the transport, or it was refed.
// A stream's attempt ends with the stream (streamEnd); an event
// delivery's attempt that was passed over is counted and noted on the
// delivery's span (deliveryAttemptEnd).
func (o observer) AttemptEnd(ctx context.Context, a runtime.Attempt, r runtime.AttemptResult) {
	if a.Stream {
		o.in.streamEnd(ctx, a, r)
		return
	}
	if a.Event {
		o.in.deliveryAttemptEnd(ctx, a, r)
		return
	}
	st := stateOf(ctx)
	if r.Refused && o.in.m != nil {
		o.in.m.clientRefused.Add(ctx, 1, o.in.m.by.of(procedureOf(st, a.Pattern.String()), r.Code, true).add...)
	}
	if !st.recording() {
		return
	}
	var span trace.Span
	target := o.in.targetAttrs(a.Target)
	if a.N > 1 {
		span = trace.SpanFromContext(ctx) // started by AttemptStart
	} else {
		if !r.Refused && r.Err == nil && len(st.refeeds) == 0 {
			return
		}
		_, span = o.in.tracer.Start(trace.ContextWithSpan(st, st.span), "Attempt."+procedureOf(st, a.Pattern.String()), append(internalKind, trace.WithTimestamp(st.firstStart))...)
		span.SetAttributes(append(target, systemAttr, keyPattern.String(a.Pattern.String()), keyAttempt.Int(1))...)
		for _, at := range st.refeeds {
			span.AddEvent("refeed", trace.WithTimestamp(at), trace.WithAttributes(target...))
		}
	}
	code := keyCode.String(r.Code.String())
	span.SetAttributes(code)
	switch {
	case r.Refused:
		span.AddEvent("refused", trace.WithAttributes(code))
		span.SetStatus(codes.Error, "refused: "+r.Code.String())
		st.span.AddEvent("refused", trace.WithAttributes(append(target, keyAttempt.Int(a.N), code)...))
	case r.Err != nil:
		span.RecordError(r.Err)
		span.SetStatus(codes.Error, r.Err.Error())
	case r.Code != runtime.CodeOK:
		span.SetStatus(codes.Error, r.Code.String())
	}
	span.End()
}

// Event records refeeds, refusals and duplicates.
func (o observer) Event(ctx context.Context, e runtime.Event) {
	switch e.Kind {
	case runtime.EventRefeed:
		if d := deliveryOf(ctx); d != nil {
			// An event's delivery sent again: its span says so.
			if d.span != nil {
				d.span.AddEvent("refeed", trace.WithAttributes(o.in.targetAttrs(e.Target)...))
			}
			return
		}
		st := stateOf(ctx)
		if o.in.m != nil {
			o.in.m.refeeds.Add(ctx, 1, o.in.m.by.of(procedureOf(st, ""), 0, false).add...)
		}
		if st.recording() {
			ev := trace.WithAttributes(o.in.targetAttrs(e.Target)...)
			st.span.AddEvent("refeed", ev)
			if st.attempt == 1 {
				st.refeeds = append(st.refeeds, time.Now()) // for its span, made when it ends
			} else {
				trace.SpanFromContext(ctx).AddEvent("refeed", ev)
			}
		}
	case runtime.EventRefused:
		if d := deliveryOf(ctx); d != nil {
			// A local delivery this node refused (closing, over its
			// in-flight limit): the group's miss, which the delivery's
			// span and counters have; no call was served.
			if d.span != nil && d.span.IsRecording() {
				d.span.AddEvent("refused", trace.WithAttributes(keyCode.String(e.Code.String())))
			}
			return
		}
		if o.in.m != nil {
			o.in.m.serverRefused.Add(ctx, 1, o.in.m.by.of(e.Spec.Procedure, e.Code, true).add...)
		}
		o.serverEvent(ctx, e, "refused", keyCode.String(e.Code.String()))
	case runtime.EventDuplicate:
		if o.in.m != nil {
			o.in.m.dups.Add(ctx, 1, o.in.m.by.of(e.Spec.Procedure, 0, false).add...)
		}
		o.serverEvent(ctx, e, "duplicate")
	}
}

// serverEvent records a call the serving node answered without running
// its handler as a server span of its own, a child of the caller's,
// with one event.
func (o observer) serverEvent(ctx context.Context, e runtime.Event, name string, attrs ...attribute.KeyValue) {
	if o.in.tracer == nil {
		return
	}
	ctx = o.in.extract(ctx, runtime.IncomingMetadata(ctx))
	_, span := o.in.tracer.Start(ctx, e.Spec.Procedure, serverKind...)
	if span.IsRecording() {
		span.SetAttributes(systemAttr, keyMethod.String(e.Spec.Procedure))
		span.SetAttributes(attrs...)
		span.AddEvent(name, trace.WithAttributes(attrs...))
	}
	span.End()
}

// procedureOf is the procedure of the call whose state is st, as metrics
// and spans name it: a typed call's method, an untyped call's matched
// pattern, else pattern, else [other].
func procedureOf(st *callState, pattern string) string {
	if st != nil {
		if st.typed != "" {
			return st.typed
		}
		st.mu.Lock()
		p := st.pattern
		st.mu.Unlock()
		if p != "" {
			pattern = p
		}
	}
	return cmp.Or(pattern, other)
}

// targetAttrs are the attributes naming t: its node id, address and
// port. They are kept by target once its id is known (at most
// maxCachedSets targets), so that calls do not make them again.
func (in *instrumentation) targetAttrs(t *runtime.Target) []attribute.KeyValue {
	if t == nil {
		return nil
	}
	if v, ok := in.targets.Load(t); ok {
		return v.([]attribute.KeyValue)
	}
	id := t.ID()
	attrs := make([]attribute.KeyValue, 0, 3)
	attrs = append(attrs, keyTarget.String(cmp.Or(id, t.Addr())))
	attrs = append(attrs, hostPort(semconv.ServerAddressKey, semconv.ServerPortKey, t.Addr())...)
	attrs = slices.Clip(attrs) // callers append to it
	if id != "" && in.nTargets.Load() < maxCachedSets {
		if _, loaded := in.targets.LoadOrStore(t, attrs); !loaded {
			in.nTargets.Add(1)
		}
	}
	return attrs
}
