package wizotel

import (
	"fmt"
	"strings"

	"github.com/wizardmesh/wizard/runtime"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// maxPanicMessage bounds the panic value an exception event carries: a
// panic's value can be anything, and the runtime's log has it whole.
const maxPanicMessage = 512

// panicked records on span (nil when tracing is off) that what panicked
// with p, or exited its goroutine when p is nil (runtime.Goexit), and
// returns the error it ends with: internal, as the runtime answers a
// panicking handler. The event has the panic's type and value, not its
// stack: the runtime logs that with the panic.
func panicked(span trace.Span, what string, p any) error {
	if p == nil {
		return runtime.Errorf(runtime.CodeInternal, "wizard: %s did not return", what)
	}
	if span != nil && span.IsRecording() {
		msg := fmt.Sprint(p)
		if len(msg) > maxPanicMessage {
			msg = strings.ToValidUTF8(msg[:maxPanicMessage], "") + "…"
		}
		span.AddEvent(semconv.ExceptionEventName, trace.WithAttributes(
			semconv.ExceptionType(fmt.Sprintf("%T", p)), semconv.ExceptionMessage(msg)))
	}
	return runtime.Errorf(runtime.CodeInternal, "wizard: %s panicked", what)
}

// repanic goes on with the panic p that a deferred function recovered;
// a nil p (runtime.Goexit) goes on by itself.
func repanic(p any) {
	if p != nil {
		panic(p)
	}
}
