package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/wizardmesh/wizard/runtime/internal/ratelog"
)

// The node's logger: the one [WithLogger] gives, else Warn and above to
// slog.Default(). Either way the records at Warn and above are limited
// per message (ratelog): a peer that keeps failing, or a flood of bad
// calls, logs a few lines and a count, not a line each.

// newLogger returns the logger of a node given l by WithLogger (nil for
// none) and the limiter in front of it, which the node closes when it
// stops.
func newLogger(l *slog.Logger) (*slog.Logger, *ratelog.Handler) {
	var h slog.Handler = defaultHandler{}
	if l != nil {
		h = l.Handler()
	}
	rh := ratelog.NewHandler(h)
	return slog.New(rh), rh
}

// defaultHandler passes the records at Warn and above to slog.Default()'s
// handler, looked up at each record, so that a program that sets its
// default logger after it made its nodes still gets their records.
type defaultHandler struct {
	with []func(slog.Handler) slog.Handler // WithAttrs and WithGroup, in order
}

func (h defaultHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn && slog.Default().Handler().Enabled(ctx, level)
}

func (h defaultHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	out := slog.Default().Handler()
	if isStandard(out) {
		if stack, ok := stackOf(r); ok {
			return out.Handle(ctx, h.stackBelow(ctx, r, stack))
		}
	}
	for _, w := range h.with {
		out = w(out)
	}
	return out.Handle(ctx, r)
}

func (h defaultHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.and(func(out slog.Handler) slog.Handler { return out.WithAttrs(attrs) })
}

func (h defaultHandler) WithGroup(name string) slog.Handler {
	return h.and(func(out slog.Handler) slog.Handler { return out.WithGroup(name) })
}

func (h defaultHandler) and(w func(slog.Handler) slog.Handler) defaultHandler {
	return defaultHandler{with: append(h.with[:len(h.with):len(h.with)], w)}
}

// isStandard reports whether h is the handler slog.Default() has in a
// program that set none: it writes through the log package, a line of
// text per record, usually to a terminal.
func isStandard(h slog.Handler) bool { return fmt.Sprintf("%T", h) == "*slog.defaultHandler" }

// stackOf returns the [stackTrace] attribute of r, if it has one.
func stackOf(r slog.Record) (stack string, found bool) {
	r.Attrs(func(a slog.Attr) bool {
		if s, ok := a.Value.Any().(stackTrace); ok && a.Value.Kind() == slog.KindLogValuer {
			stack, found = string(s), true
		}
		return !found
	})
	return stack, found
}

// stackBelow is a record of the standard handler for r, whose stack
// follows its line: that handler quotes a value with newlines onto one
// line (a stack full of \n and \t), but writes the message as it is. So
// the message holds the line's attributes, in the text format, and then
// the stack, one frame a line as a Go panic prints it.
func (h defaultHandler) stackBelow(ctx context.Context, r slog.Record, stack string) slog.Record {
	var b strings.Builder
	var text slog.Handler = slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey) {
			return slog.Attr{}
		}
		return a
	}})
	for _, w := range h.with {
		text = w(text)
	}
	attrs := slog.NewRecord(r.Time, r.Level, "", r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if _, ok := a.Value.Any().(stackTrace); !ok {
			attrs.AddAttrs(a)
		}
		return true
	})
	_ = text.Handle(ctx, attrs)
	msg := r.Message
	if line := strings.TrimSpace(b.String()); line != "" {
		msg += " " + line
	}
	return slog.NewRecord(r.Time, r.Level, msg+"\n"+strings.TrimSuffix(stack, "\n"), r.PC)
}

// stackTrace is a goroutine's stack (debug.Stack), logged as one
// attribute: a string of its lines.
type stackTrace string

// LogValue returns the stack as a string of its lines.
func (s stackTrace) LogValue() slog.Value {
	return slog.StringValue(strings.TrimSuffix(string(s), "\n"))
}
