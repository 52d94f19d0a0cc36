package ratelog

import (
	"context"
	"log/slog"
	"sync"
)

// maxMessages bounds the limiters of a [Handler]: records of further
// messages share one.
const maxMessages = 64

// Handler is a slog.Handler that limits the records at Warn and above
// reaching the handler it wraps, with a [Limiter] per message (messages
// are expected to be constants, the variable parts in attributes).
// Records below Warn pass: they are logged only when asked for. Handlers
// derived by WithAttrs and WithGroup share the limiters.
type Handler struct {
	next   slog.Handler
	shared *limiters
}

var _ slog.Handler = (*Handler)(nil)

type limiters struct {
	out    slog.Handler // the wrapped handler before any attributes: summaries go there
	mu     sync.Mutex
	byMsg  map[string]*Limiter
	other  *Limiter // for messages beyond maxMessages
	closed bool
}

// NewHandler returns a handler that limits the records reaching h.
func NewHandler(h slog.Handler) *Handler {
	return &Handler{next: h, shared: &limiters{out: h, byMsg: map[string]*Limiter{}}}
}

// Enabled reports whether the wrapped handler handles records of level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle passes r on unless its message's limiter suppresses it.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn && !h.shared.limiter(r.Message).Allow(r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs returns a handler whose records carry attrs, limited with h's.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(attrs), shared: h.shared}
}

// WithGroup returns a handler whose attributes go in group name, limited
// with h's.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), shared: h.shared}
}

// Close closes every limiter (see [Limiter.Close]): their summaries are
// logged; records that come later are not limited. It is idempotent.
func (h *Handler) Close() {
	s := h.shared
	s.mu.Lock()
	s.closed = true
	ls := make([]*Limiter, 0, len(s.byMsg)+1)
	for _, l := range s.byMsg {
		ls = append(ls, l)
	}
	if s.other != nil {
		ls = append(ls, s.other)
	}
	s.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
}

// limiter returns msg's limiter.
func (s *limiters) limiter(msg string) *Limiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.byMsg[msg]; l != nil {
		return l
	}
	var l *Limiter
	switch {
	case len(s.byMsg) < maxMessages:
		l = NewLimiter(s.out, msg)
		s.byMsg[msg] = l
	case s.other == nil:
		s.other = NewLimiter(s.out, "other log records")
		l = s.other
	default:
		l = s.other
	}
	if s.closed {
		l.Close()
	}
	return l
}
