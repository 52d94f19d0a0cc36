package wizotel

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Instrument returns the option that gives a node ([runtime.New]) traces
// and metrics: a handler interceptor, a call interceptor and a
// [runtime.Observer]. Give it first among the node's interceptors, so that
// the spans and durations cover the others.
//
// Tracing is on when a tracer provider is given ([WithTracerProvider]) or
// set globally (otel.SetTracerProvider) before Instrument is called;
// metrics likewise with a meter provider. With neither, Instrument adds
// nothing to the node and costs its calls nothing.
func Instrument(opts ...Option) runtime.Option {
	in := newInstrumentation(newConfig(opts))
	if in.tracer == nil && in.m == nil {
		return runtime.WithOptions()
	}
	return runtime.WithOptions(
		runtime.WithHandlerInterceptors(in.handler),
		runtime.WithCallInterceptors(in.call),
		runtime.WithObserver(observer{in: in}),
	)
}

// instrumentation is what Instrument's interceptors and observer share.
type instrumentation struct {
	tracer trace.Tracer // nil: tracing is off
	prop   propagation.TextMapPropagator
	w3c    *w3c     // prop without a carrier, or nil
	m      *metrics // nil: metrics are off

	targets  sync.Map // *runtime.Target → []attribute.KeyValue, by targetAttrs
	nTargets atomic.Int64
	peers    sync.Map // a caller's address → its []attribute.KeyValue, by peerAttrs
	nPeers   atomic.Int64
}

func newInstrumentation(c config) *instrumentation {
	in := &instrumentation{prop: c.prop, w3c: c.w3c}
	if c.tp != nil {
		in.tracer = c.tp.Tracer(scope, trace.WithSchemaURL(semconv.SchemaURL))
	}
	if c.mp != nil {
		m, err := newMetrics(c.mp)
		if err != nil {
			otel.Handle(err) // the SDK refused an instrument: metrics stay off
		} else {
			in.m = m
		}
	}
	return in
}

// The options of the spans started: made once, so that starting a span
// allocates none.
var (
	clientKind   = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
	serverKind   = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	internalKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
)

// other is the procedure of an untyped call no pattern matched, in
// metrics: its pattern, made of the message's fields, is not a bounded
// name (the RPC conventions' "_OTHER").
const other = "_OTHER"

// callState is what the instrumentation learns of a call while it runs:
// the pattern that matched it (from the handler interceptor of an
// in-process call, or the observer's attempts of a remote one) and the
// call's span. It is the call's ctx too, which carries it: one
// allocation for both.
type callState struct {
	context.Context
	span  trace.Span  // nil when tracing is off
	typed string      // a typed call's method: its procedure whatever matched
	tp    traceparent // the call's traceparent in its metadata, with the default propagator

	mu      sync.Mutex
	pattern string

	// Of the call's attempts, on the call's goroutine (a remote call's
	// attempts are made one after the other on it), when it is recording:
	target     *runtime.Target // of the last attempt
	attempt    int             // the last attempt's number
	firstStart time.Time       // when the first attempt started
	refeeds    []time.Time     // when the first attempt was refed
}

// recording reports whether the call of st has a span that records.
func (st *callState) recording() bool {
	return st != nil && st.span != nil && st.span.IsRecording()
}

type callStateKey struct{}

// Value returns the state itself under callStateKey.
func (st *callState) Value(key any) any {
	if key == (callStateKey{}) {
		return st
	}
	return st.Context.Value(key)
}

func stateOf(ctx context.Context) *callState {
	st, _ := ctx.Value(callStateKey{}).(*callState)
	return st
}

// matchedPattern returns the pattern that matched the call, or "".
func (st *callState) matchedPattern() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.pattern
}

// matched records the pattern that matched the call.
func (st *callState) matched(p string) {
	st.mu.Lock()
	st.pattern = p
	st.mu.Unlock()
}

// call is the call interceptor: a client span around the call (its
// attempts are the observer's), trace context into the call's metadata,
// the call's duration and the calls in flight. A call that panics (in
// an interceptor after this one, say) ends them too, as internal, and
// goes on panicking to its caller. An event's delivery is no call: it
// is the event's producer (see deliver).
func (in *instrumentation) call(next runtime.Invoker) runtime.Invoker {
	return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		if c.Event {
			return in.deliver(ctx, next, c)
		}
		spec := c.Spec()
		st := &callState{Context: ctx}
		if spec.Method != nil {
			st.typed = spec.Procedure
		}
		ctx = st
		if in.tracer != nil {
			ctx, st.span = in.tracer.Start(ctx, spec.Procedure, clientKind...)
			ctx = in.inject(ctx, &st.tp)
		}
		var start time.Time
		var active *attrOpts
		if in.m != nil {
			start = time.Now()
			active = in.m.by.active(procedureOf(st, "")) // a typed call's method, else _OTHER: the pattern is not known yet
			active.active[client].Add(1)
		}
		returned := false
		defer func() {
			if !returned {
				p := recover()
				in.endCall(ctx, st, spec, active, start, panicked(st.span, "call "+spec.Procedure, p))
				repanic(p)
			}
		}()
		res, err := next(ctx, c)
		returned = true
		in.endCall(ctx, st, spec, active, start, err)
		return res, err
	}
}

// endCall measures a call that ended with err and ends its span.
func (in *instrumentation) endCall(ctx context.Context, st *callState, spec runtime.Spec, active *attrOpts, start time.Time, err error) {
	code := runtime.CodeOf(err)
	proc := procedureOf(st, "")
	if in.m != nil {
		active.active[client].Add(-1)
		in.m.clientDuration.Record(ctx, time.Since(start).Seconds(), in.m.by.of(proc, code, true).record...)
	}
	if st.span != nil {
		in.endClient(st, spec, proc, code, err)
	}
}

// endClient sets a client span's attributes and status, and ends it: any
// code but ok is an error of the call.
func (in *instrumentation) endClient(st *callState, spec runtime.Spec, proc string, code runtime.Code, err error) {
	span := st.span
	if span.IsRecording() {
		if spec.Method == nil && proc != other {
			span.SetName(proc) // the pattern that matched, rather than the message's
		}
		buf := getAttrs()
		defer putAttrs(buf)
		attrs := append(buf[:0], systemAttr, keyMethod.String(proc), keyCode.String(code.String()))
		if p := st.matchedPattern(); p != "" {
			attrs = append(attrs, keyPattern.String(p))
		}
		if err != nil {
			attrs = append(attrs, semconv.ErrorTypeKey.String(code.String()))
			span.SetStatus(codes.Error, err.Error())
		}
		if st.target != nil {
			attrs = append(attrs, in.targetAttrs(st.target)...)
		}
		span.SetAttributes(attrs...) // once: each call takes the span's lock
	}
	span.End()
}

// handler is the handler interceptor: a server span, its parent the
// caller's span named by the call's metadata, the call's duration and
// the calls in flight. A handler that panics ends them too, as the
// internal error the runtime answers it with, and goes on panicking to
// the runtime's recovery. Around a stream's handler it measures the
// stream instead (its open streams, duration and messages), and its span
// says so and counts the messages. Around a subscription running on an
// event it is the event's consumer (see consumer).
func (in *instrumentation) handler(next runtime.Handler) runtime.Handler {
	return func(ctx context.Context, req runtime.Request) (any, error) {
		if req.Group() != "" {
			return in.consumer(ctx, next, req) // a subscription, on an event
		}
		sc := serverCall{spec: req.Spec(), req: req}
		_, _, sc.stream = req.StreamMessages()
		if st := stateOf(ctx); st != nil && !sc.stream {
			st.matched(req.Pattern().String()) // an in-process call: its caller learns what matched
		}
		if in.tracer != nil {
			// An in-process stream has no client span, and its metadata
			// no trace context of its own: its parent is its opener's
			// span, when it has one.
			if !sc.stream || !trace.SpanContextFromContext(ctx).IsValid() {
				ctx = in.extract(ctx, runtime.IncomingMetadata(ctx))
			}
			ctx, sc.span = in.tracer.Start(ctx, sc.spec.Procedure, serverKind...)
		}
		if in.m != nil {
			sc.start = time.Now()
			if sc.stream {
				sc.active = in.m.by.streams(sc.spec.Procedure)
				sc.active.streams[server].Add(1)
			} else {
				sc.active = in.m.by.active(sc.spec.Procedure)
				sc.active.active[server].Add(1)
			}
		}
		returned := false
		defer func() {
			if !returned {
				p := recover()
				in.endServerCall(ctx, &sc, panicked(sc.span, "handler for "+strconv.Quote(req.Pattern().String()), p))
				repanic(p)
			}
		}()
		res, err := next(ctx, req)
		returned = true
		in.endServerCall(ctx, &sc, err)
		return res, err
	}
}

// serverCall is what the handler interceptor keeps of a call it serves.
type serverCall struct {
	spec   runtime.Spec
	req    runtime.Request
	stream bool       // the call is a stream's
	span   trace.Span // nil when tracing is off
	start  time.Time
	active *attrOpts // nil when metrics are off
}

// endServerCall measures a served call or stream that ended with err and
// ends its span.
func (in *instrumentation) endServerCall(ctx context.Context, sc *serverCall, err error) {
	code := runtime.CodeOf(err)
	if in.m != nil {
		if sc.stream {
			sc.active.streams[server].Add(-1)
			sent, received, _ := sc.req.StreamMessages()
			in.m.endStream(ctx, server, sc.spec.Procedure, code, time.Since(sc.start), sent, received)
		} else {
			sc.active.active[server].Add(-1)
			in.m.serverDuration.Record(ctx, time.Since(sc.start).Seconds(), in.m.by.of(sc.spec.Procedure, code, true).record...)
		}
	}
	if sc.span != nil {
		in.endServer(sc.span, sc.spec, sc.req, sc.stream, code, err)
	}
}

// endServer sets a server span's attributes, code and status, and ends
// it: all its attributes at once (each SetAttributes takes the span's
// lock). As the RPC conventions have it, only the codes that say the
// server failed (unknown, deadline_exceeded, unimplemented, internal,
// unavailable, data_loss) make the span an error; the others are the
// caller's.
func (in *instrumentation) endServer(span trace.Span, spec runtime.Spec, req runtime.Request, stream bool, code runtime.Code, err error) {
	if span.IsRecording() {
		src := req.Source()
		buf := getAttrs()
		defer putAttrs(buf)
		attrs := append(buf[:0], systemAttr, keyMethod.String(spec.Procedure), keyPattern.String(req.Pattern().String()))
		if !stream || src.Transport != "" {
			// An in-process stream's Request names no caller of its own
			// (its Source is the serving node, without a transport):
			// wizard.caller is left out rather than wrong.
			attrs = append(attrs, keyCaller.String(src.Node))
		}
		attrs = append(attrs, keyCode.String(code.String()))
		if stream {
			sent, received, _ := req.StreamMessages()
			attrs = append(attrs, keyStream.Bool(true), keyStreamSent.Int64(sent), keyStreamReceived.Int64(received))
		}
		if src.Transport != "" {
			attrs = append(attrs, semconv.NetworkTransportKey.String(src.Transport))
		}
		attrs = append(attrs, in.peerAttrs(src.Addr)...)
		if err != nil && serverFault(code) {
			attrs = append(attrs, semconv.ErrorTypeKey.String(code.String()))
			span.SetStatus(codes.Error, err.Error())
		}
		span.SetAttributes(attrs...)
	}
	span.End()
}

// attrBufs hold the attributes a span's end sets: SetAttributes copies
// them, and a buffer of the stack would escape through the interface.
var attrBufs = sync.Pool{New: func() any { return new([14]attribute.KeyValue) }}

func getAttrs() *[14]attribute.KeyValue { return attrBufs.Get().(*[14]attribute.KeyValue) }

func putAttrs(b *[14]attribute.KeyValue) {
	clear(b[:])
	attrBufs.Put(b)
}

func serverFault(c runtime.Code) bool {
	switch c {
	case runtime.CodeUnknown, runtime.CodeDeadlineExceeded, runtime.CodeUnimplemented,
		runtime.CodeInternal, runtime.CodeUnavailable, runtime.CodeDataLoss:
		return true
	}
	return false
}

// peerAttrs are the attributes of a caller's address (at most
// maxCachedSets kept).
func (in *instrumentation) peerAttrs(addr string) []attribute.KeyValue {
	if addr == "" {
		return nil
	}
	if v, ok := in.peers.Load(addr); ok {
		return v.([]attribute.KeyValue)
	}
	attrs := hostPort(semconv.NetworkPeerAddressKey, semconv.NetworkPeerPortKey, addr)
	if in.nPeers.Load() < maxCachedSets {
		if _, loaded := in.peers.LoadOrStore(addr, attrs); !loaded {
			in.nPeers.Add(1)
		}
	}
	return attrs
}

// hostPort is addr ("host:port") as the attributes hostKey and portKey;
// none for an empty addr, the host alone without a port.
func hostPort(hostKey, portKey attribute.Key, addr string) []attribute.KeyValue {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return []attribute.KeyValue{hostKey.String(addr)}
	}
	if p, err := strconv.Atoi(port); err == nil {
		return []attribute.KeyValue{hostKey.String(host), portKey.Int(p)}
	}
	return []attribute.KeyValue{hostKey.String(host)}
}
