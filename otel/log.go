package wizotel

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// NewLogHandler returns a handler that adds trace_id and span_id to the
// records logged with a ctx inside a span (a handler's ctx, a call's),
// then passes them to next: slog.New(wizotel.NewLogHandler(h)), given to
// a node with runtime.WithLogger or used by handlers through
// slog.InfoContext(ctx, ...). Records without a span pass unchanged. The
// ids are added as the record's own attributes, so they sit in the
// groups of next's WithGroup.
func NewLogHandler(next slog.Handler) slog.Handler {
	if next == nil {
		next = slog.Default().Handler()
	}
	return logHandler{next}
}

type logHandler struct{ next slog.Handler }

func (h logHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r = r.Clone() // another handler may hold the record's attributes
			r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
		}
	}
	return h.next.Handle(ctx, r)
}

func (h logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{h.next.WithAttrs(attrs)}
}

func (h logHandler) WithGroup(name string) slog.Handler {
	return logHandler{h.next.WithGroup(name)}
}
