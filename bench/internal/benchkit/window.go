package benchkit

import (
	"sync/atomic"
	"time"
)

// Window is the measured window of a closed-loop run: the calls that end
// in [From, To) count. While no call has ended since From, the window
// stays open past To until the first does (the run's grace bounds the
// wait), and that call counts: on a loaded machine a call may outlast a
// short window, and the run then measures that slow call instead of
// 0 req/s. A call that fails closes the window too, so a run of failures
// ends at To as before.
type Window struct {
	From, To time.Time
	first    atomic.Pointer[time.Time] // the end of the first call ended at or after From
}

// NewWindow returns the window [from, to).
func NewWindow(from, to time.Time) *Window { return &Window{From: from, To: to} }

// Open reports whether a caller starts another call at now: before To,
// or while no call has ended in the window.
func (w *Window) Open(now time.Time) bool {
	return now.Before(w.To) || w.first.Load() == nil
}

// Ended records a call that ended at e, ok if it succeeded, and reports
// whether it counts: it succeeded and ended in [From, To), or it is the
// first call to end since From, after To.
func (w *Window) Ended(e time.Time, ok bool) bool {
	if e.Before(w.From) {
		return false
	}
	won := false
	if w.first.Load() == nil {
		// Only the call that may be the first takes a copy of e: taking
		// e's address directly would move e to the heap on every call,
		// an allocation per call in the load loop's timing.
		p := new(time.Time)
		*p = e
		won = w.first.CompareAndSwap(nil, p)
	}
	return ok && (e.Before(w.To) || won)
}

// End is the window's end: To, or the end of the first call when it
// ended after To.
func (w *Window) End() time.Time {
	if f := w.first.Load(); f != nil && f.After(w.To) {
		return *f
	}
	return w.To
}
