package ratelog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// The limits of every [Limiter]: Burst events pass in each Interval.
const (
	Burst    = 10
	Interval = 10 * time.Second
)

// Limiter limits one kind of event. An interval starts with the first
// event after the previous one ended. Its methods are safe for concurrent
// use.
type Limiter struct {
	out  slog.Handler // receives the summaries
	what string       // what the summaries count

	mu         sync.Mutex
	start      time.Time   // of the current interval; zero when none is open
	passed     int         // events passed in the current interval
	suppressed int         // events suppressed in the current interval
	level      slog.Level  // the highest level suppressed in the interval
	timer      *time.Timer // armed at the first suppressed event of an interval
	closed     bool
	events     int // since the start
}

// NewLimiter returns a limiter whose summaries go to out and say what
// they count ("wizard: connection closed").
func NewLimiter(out slog.Handler, what string) *Limiter {
	return &Limiter{out: out, what: what}
}

// Allow reports whether an event of level may be logged; when not, the
// event is counted in the next summary. After [Limiter.Close] every event
// may be logged.
func (l *Limiter) Allow(level slog.Level) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events++
	if l.closed {
		return true
	}
	now := time.Now()
	if !l.start.IsZero() && now.Sub(l.start) >= Interval {
		l.endLocked() // the timer has not run yet
	}
	if l.start.IsZero() {
		l.start = now
	}
	if l.passed < Burst {
		l.passed++
		return true
	}
	if l.suppressed == 0 || level > l.level {
		l.level = level
	}
	l.suppressed++
	if l.timer == nil {
		l.timer = time.AfterFunc(Interval-now.Sub(l.start), l.end)
	} else if l.suppressed == 1 {
		l.timer.Reset(Interval - now.Sub(l.start))
	}
	return false
}

// end ends the current interval when its time is up.
func (l *Limiter) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed && !l.start.IsZero() && time.Since(l.start) >= Interval {
		l.endLocked()
	}
}

// endLocked logs the summary of the current interval, if it suppressed
// anything, and closes it. Callers hold l.mu.
func (l *Limiter) endLocked() {
	if l.suppressed > 0 {
		l.summarize()
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	l.start, l.passed, l.suppressed = time.Time{}, 0, 0
}

// summarize logs the count of suppressed events.
func (l *Limiter) summarize() {
	ctx := context.Background()
	if !l.out.Enabled(ctx, l.level) {
		return
	}
	r := slog.NewRecord(time.Now(), l.level, fmt.Sprintf("%s: %d more suppressed", l.what, l.suppressed), 0)
	r.AddAttrs(slog.Int("suppressed", l.suppressed), slog.Duration("interval", Interval))
	_ = l.out.Handle(ctx, r)
}

// Events returns how many events the limiter has seen, passed or not.
func (l *Limiter) Events() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.events
}

// Close logs the summary of what is suppressed so far and stops the
// limiter's timer. It is idempotent.
func (l *Limiter) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.endLocked()
	l.closed = true
}
