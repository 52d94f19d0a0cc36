// Package wizotel gives wizard nodes OpenTelemetry traces and metrics,
// and logs that carry the trace. It is its own module
// (github.com/wizardmesh/wizard/otel), so that the runtime's module
// depends on no OpenTelemetry package:
//
//	import wizotel "github.com/wizardmesh/wizard/otel"
//
//	tr, err := tcp.New()
//	if err != nil {
//		return err
//	}
//	node, err := runtime.New(
//		wizotel.Instrument(wizotel.WithTracerProvider(tp), wizotel.WithMeterProvider(mp)),
//		runtime.WithTransport(tr),
//	)
//
// [Instrument] returns one node option: a handler interceptor, a call
// interceptor and a [runtime.Observer]. Without providers (none given,
// none set globally when Instrument is called) it adds nothing and costs
// nothing.
//
// # Traces
//
// A call a node makes is a client span named by its procedure
// ([runtime.Call.Spec]: a typed method's full name, such as
// "wizard.examples.math.v1.MathService/Sum"; for an untyped call the
// pattern that matched it), naming the pattern that matched
// (wizard.pattern) and the target of its last attempt (wizard.target, the
// node id; server.address, server.port). An attempt of a remote call that
// did not simply answer (it was refused, failed in the transport or was
// refed), and every attempt after the first, is a child span of its own,
// "Attempt.<procedure>", with its number (wizard.attempt), target and
// code: a call answered at its first attempt is one client span, a
// retried call shows each attempt. A call a node serves is a server span
// named by the handler's procedure ([runtime.Request.Spec]), with the
// caller's node id (wizard.caller), its address (network.peer.address,
// network.peer.port), the transport (network.transport) and the pattern
// that matched (wizard.pattern). Spans follow OpenTelemetry's RPC
// conventions
// (semconv 1.43): rpc.system.name "wizard", rpc.method (the procedure),
// rpc.response.status_code (the wizard code: "ok", "not_found", …).
// A client span with any code but ok has status Error; a server span only
// for the codes that say the server failed (unknown, deadline_exceeded,
// unimplemented, internal, unavailable, data_loss).
//
// A handler that panics ends its server span and its measurements as
// the internal error the runtime answers it with: status Error, code
// internal, and an "exception" event with the panic's type and value
// (exception.type, exception.message, cut to 512 bytes; the stack is in
// the runtime's log, not the span). The panic then goes on to the
// runtime's recovery, which logs it and answers the caller. A call that
// panics on the calling side (in an interceptor after Instrument's, say)
// ends its client span and measurements the same way and goes on
// panicking to its caller.
//
// Retries ("retry"), refeeds ("refeed", a call sent again after its
// connection dropped) and refusals ("refused") are events of the call's
// span; a call a serving node refuses without running its handler, or
// answers from its de-duplication table, is a server span of its own with
// a "refused" or "duplicate" event.
//
// Trace context travels in call metadata (the keys traceparent,
// tracestate and baggage of W3C trace context, or those of the propagator
// given with [WithPropagators]): a chain caller → A → B, in-process or
// over TCP or QUIC, is one trace. The server span is in the handler's
// ctx, so the handler's own calls are its children. The trace context is
// put in the call's metadata once per call (with the default propagator
// without a carrier: the traceparent is formatted and parsed directly,
// as propagation.TraceContext would): a server span's parent is the
// caller's call span, its attempts are siblings of it. A call that is not
// sampled has no attempt spans.
//
// What the interceptors and the observer do not see: a call refused by
// the serving transport over its caller's share of the node's in-flight
// limit (runtime/internal/mux) never reaches the serving node, so it is
// seen only by the caller (a refused attempt); runtime.Node.Stats().Shed
// does not count it either.
//
// # Metrics
//
// Durations (histograms in seconds, by rpc.method and
// rpc.response.status_code): rpc.client.call.duration and
// rpc.server.call.duration. In flight (by rpc.method; counted by the
// instrumentation and observed at each collection while a node
// instrumented with it is open, so that a call pays two atomic adds
// rather than two measurements): wizard.client.calls.active,
// wizard.server.calls.active. Counters:
// wizard.client.retries, wizard.client.refeeds (by rpc.method),
// wizard.client.attempts.refused and wizard.server.refused (by rpc.method
// and code), wizard.server.duplicates (by rpc.method). Observed from each
// node (by wizard.node.id): wizard.peers (a gauge by wizard.peer.state:
// connected, suspect, disconnected) and [runtime.Node.Stats] as the
// counters wizard.node.shed, wizard.node.retries, wizard.node.refeeds and
// wizard.node.duplicates. [BreakerStates] counts the state changes of
// runtime/lb's breakers (wizard.breaker.transitions).
//
// An untyped call's rpc.method is the pattern that matched it, or
// "_OTHER" when none did (or, for the calls in flight, always: the
// pattern is not known when the call starts), since the patterns of
// [runtime.Node.Act] hold the message's fields and are no bounded name.
//
// # Streams
//
// A remote stream a node opens ([runtime.Node.OpenStream],
// [runtime.Client.Stream]) is a client span from its open to its end,
// named by the pattern it was opened to (the observer sees its attempt,
// not a typed client's method), its trace context in the open's
// metadata; the stream it serves is the handler interceptor's server
// span, named by the handler's procedure, the client span's child. Both
// carry wizard.stream (true), the messages their side sent and received
// (wizard.stream.messages_sent, wizard.stream.messages_received) and the
// stream's code, with the calls' status rules. A stream in-process is
// the server span alone, a child of the opener's span: it is no attempt,
// and call interceptors do not run for streams.
//
// Streams have their own instruments, by rpc.method, and none of the
// calls': wizard.client.streams.active and wizard.server.streams.active
// (observed as the calls in flight are), the counters
// wizard.client.stream.messages.sent, wizard.client.stream.messages.received,
// wizard.server.stream.messages.sent and
// wizard.server.stream.messages.received (added when a stream ends), and
// the histograms wizard.client.stream.duration and
// wizard.server.stream.duration (in seconds, by rpc.method and
// rpc.response.status_code).
//
// # Events
//
// Events ([runtime.Node.Emit], [runtime.Node.Broadcast]) follow the
// OpenTelemetry messaging conventions with messaging.system=wizard. Each
// delivery of an event to a group, local or remote, goes through the
// node's call interceptors: Instrument's makes it a PRODUCER span
// "emit <group>" ("broadcast", one per node, for a broadcast), a child of
// the emitter's span, messaging.operation.type send,
// messaging.destination.name the group, and its trace context travels in
// the delivery's metadata. The delivery's attempts (a member that
// refused or was not reached, a refeed) are events and attributes of that
// span, as a call's attempts are of its client span. Each subscription
// that runs on the event is a CONSUMER span "process <group>" on its
// node, a child of its group's delivery span and linked to it,
// messaging.consumer.group.name the group, wizard.pattern the
// subscription's pattern. To see all the groups of one emit in one
// trace, emit within a span (a handler that emits does: its server
// span is the deliveries' parent).
//
// The emitting side counts deliveries by group and outcome
// (wizard.client.events.delivered; wizard.client.events.missed by code)
// and the attempts passed over for another member
// (wizard.client.event.attempts.passed); the subscriber times each
// subscription's run (wizard.server.event.duration, by group, pattern
// and code). Events count in none of the calls' instruments.
// [ObserveDurable] reports the per-group figures of durable events
// (delivered, redelivered, dead-lettered, pending) that an engine's
// callback returns.
//
// # Logs
//
// [NewLogHandler] wraps a slog.Handler so that records logged with a ctx
// inside a span carry trace_id and span_id.
//
// # Prometheus
//
// examples/prometheus serves a mesh's metrics at /metrics through the
// OpenTelemetry Prometheus exporter.
package wizotel
