package transporttest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// Log records log lines ("LEVEL message key=value ...") and announces the
// first line containing given strings: the events of a connection's life
// that the API does not expose (a goaway reaching a client, a connection
// closed for bad input). The zero value is ready to use.
type Log struct {
	mu    sync.Mutex
	lines []string
	waits []logWait
}

type logWait struct {
	substrs []string
	ch      chan struct{}
}

func (w logWait) match(line string) bool {
	for _, s := range w.substrs {
		if !strings.Contains(line, s) {
			return false
		}
	}
	return true
}

// Logger returns a logger, at every level, that records into l.
func (l *Log) Logger() *slog.Logger { return slog.New(logHandler{log: l}) }

// Seen returns a channel closed once a line containing every one of
// substrs is logged.
func (l *Log) Seen(substrs ...string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan struct{})
	w := logWait{substrs, ch}
	for _, line := range l.lines {
		if w.match(line) {
			close(ch)
			return ch
		}
	}
	l.waits = append(l.waits, w)
	return ch
}

// String returns the lines logged so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func (l *Log) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	l.waits = slices.DeleteFunc(l.waits, func(w logWait) bool {
		if w.match(line) {
			close(w.ch)
			return true
		}
		return false
	})
}

type logHandler struct {
	log   *Log
	attrs []slog.Attr
}

func (h logHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h logHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	write := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	h.log.add(b.String())
	return nil
}

func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{log: h.log, attrs: append(slices.Clip(h.attrs), as...)}
}

func (h logHandler) WithGroup(string) slog.Handler { return h }
