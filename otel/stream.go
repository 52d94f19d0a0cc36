package wizotel

import (
	"context"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// A remote stream a node opens is one attempt for the observer
// (runtime.Attempt.Stream): its client span and measurements start when
// the attempt starts, with the trace context injected into the stream's
// metadata, and end when the stream ends, with its code and the messages
// each way. Call interceptors do not run for streams. A stream a node
// serves is the handler interceptor's (see instrumentation.handler), with
// the stream's own instruments rather than the calls'.

// streamState is what the instrumentation keeps of a remote stream a node
// opened, from its open to its end. It is the stream's ctx too, which
// carries it: one allocation for both.
type streamState struct {
	context.Context
	span   trace.Span  // nil when tracing is off
	tp     traceparent // the stream's traceparent in its metadata, with the default propagator
	proc   string
	start  time.Time
	active *attrOpts // nil when metrics are off
}

type streamStateKey struct{}

// Value returns the state itself under streamStateKey.
func (ss *streamState) Value(key any) any {
	if key == (streamStateKey{}) {
		return ss
	}
	return ss.Context.Value(key)
}

// streamStart starts the client span of the stream a opens, a child of
// ctx's span, puts its trace context into the stream's metadata, and
// counts the stream open. A stream is named by the pattern it was opened
// to, as the target serves it: the observer does not see a typed
// client's method.
func (in *instrumentation) streamStart(ctx context.Context, a runtime.Attempt) context.Context {
	ss := &streamState{Context: ctx, proc: a.Pattern.String()}
	if ss.proc == "" {
		ss.proc = other
	}
	ctx = ss
	if in.tracer != nil {
		ctx, ss.span = in.tracer.Start(ctx, ss.proc, clientKind...)
		ctx = in.inject(ctx, &ss.tp)
	}
	if in.m != nil {
		ss.start = time.Now()
		ss.active = in.m.by.streams(ss.proc)
		ss.active.streams[client].Add(1)
	}
	return ctx
}

// streamEnd measures the stream of a that ended with r and ends its
// span: any code but ok is an error of the stream, as of a call.
func (in *instrumentation) streamEnd(ctx context.Context, a runtime.Attempt, r runtime.AttemptResult) {
	ss, _ := ctx.Value(streamStateKey{}).(*streamState)
	if ss == nil {
		return
	}
	if in.m != nil {
		ss.active.streams[client].Add(-1)
		in.m.endStream(ctx, client, ss.proc, r.Code, time.Since(ss.start), r.Sent, r.Received)
	}
	span := ss.span
	if span == nil {
		return
	}
	if span.IsRecording() {
		buf := getAttrs()
		defer putAttrs(buf)
		attrs := append(buf[:0], systemAttr, keyMethod.String(ss.proc), keyPattern.String(a.Pattern.String()),
			keyCode.String(r.Code.String()), keyStream.Bool(true), keyStreamSent.Int64(r.Sent), keyStreamReceived.Int64(r.Received))
		if a.N > 1 {
			attrs = append(attrs, keyAttempt.Int(a.N)) // the targets before it could not open it
		}
		attrs = append(attrs, in.targetAttrs(a.Target)...)
		if r.Code != runtime.CodeOK {
			attrs = append(attrs, semconv.ErrorTypeKey.String(r.Code.String()))
			msg := r.Code.String()
			if r.Err != nil {
				msg = r.Err.Error()
			}
			span.SetStatus(codes.Error, msg)
		}
		span.SetAttributes(attrs...)
	}
	span.End()
}

// endStream measures a stream of side (client, server) that lasted d and
// ended with code, having sent and received that many messages.
func (m *metrics) endStream(ctx context.Context, side int, proc string, code runtime.Code, d time.Duration, sent, received int64) {
	by := m.by.of(proc, 0, false)
	m.streamSent[side].Add(ctx, sent, by.add...)
	m.streamReceived[side].Add(ctx, received, by.add...)
	m.streamDuration[side].Record(ctx, d.Seconds(), m.by.of(proc, code, true).record...)
}
