package nats

import (
	"context"
	"sync"
	"time"
)

// callCtx is the context of a call a listener serves, in the call's job:
// it ends with the call's deadline (context.DeadlineExceeded), or with
// context.Canceled on the caller's cancel, the listener's close or the
// handler's return. It costs no timer, no channel and no registration
// with the listener's context unless the handler asks for Done:
// context.WithDeadline's cost all three on every call, a quarter of the
// listener's own time on a lone call (BenchmarkNATS's profile). Err reads
// the clock and the listener's context instead.
//
// It implements AfterFunc, so that contexts derived from it
// (context.WithTimeout and the like) need no goroutine of their own.
type callCtx struct {
	base context.Context // the listener's: ends on Close
	vals context.Context // base without its cancellation, for Value
	end  time.Time

	mu       sync.Mutex
	err      error
	done     chan struct{} // made on demand
	timer    *time.Timer   // made with done
	stopBase func() bool   // the registration with base, made with done
	after    []*afterFunc
}

type afterFunc struct{ f func() }

var _ context.Context = (*callCtx)(nil)

// Deadline returns the call's deadline.
func (c *callCtx) Deadline() (time.Time, bool) { return c.end, true }

// Value returns base's value for key. It reads them through vals,
// context.WithoutCancel(base): base's own cancellation is not c's, and
// context.Cause, which looks for it by Value, then takes c's Err.
func (c *callCtx) Value(key any) any { return c.vals.Value(key) }

// Done returns a channel closed when the context ends.
func (c *callCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armLocked()
	return c.done
}

// Err returns nil until the context ends, then why.
func (c *callCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checkLocked()
	return c.err
}

// checkLocked ends the context if its deadline has passed or base has
// ended, for a context whose Done was not asked for (nothing else would
// notice); c.mu is held.
func (c *callCtx) checkLocked() {
	if c.err != nil || c.done != nil {
		return
	}
	switch {
	case c.base.Err() != nil:
		c.cancelLocked(context.Canceled)
	case !time.Now().Before(c.end):
		c.cancelLocked(context.DeadlineExceeded)
	}
}

// AfterFunc arranges to call f in its own goroutine once the context
// ends, as context.AfterFunc does; stop undoes that if f has not started.
func (c *callCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armLocked()
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	a := &afterFunc{f: f}
	c.after = append(c.after, a)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.after {
			if x == a {
				c.after = append(c.after[:i], c.after[i+1:]...)
				return true
			}
		}
		return false
	}
}

// armLocked makes the done channel, and the timer and the registration
// with base that end the context; c.mu is held.
func (c *callCtx) armLocked() {
	if c.done != nil {
		return
	}
	c.checkLocked()
	c.done = make(chan struct{})
	if c.err != nil {
		close(c.done)
		return
	}
	c.timer = time.AfterFunc(time.Until(c.end), func() { c.cancel(context.DeadlineExceeded) })
	c.stopBase = context.AfterFunc(c.base, func() { c.cancel(context.Canceled) })
}

// cancel ends the context with err, unless it has ended already.
func (c *callCtx) cancel(err error) {
	c.mu.Lock()
	c.cancelLocked(err)
	c.mu.Unlock()
}

// cancelLocked ends the context with err, unless it has ended already,
// and releases its timer and registration; c.mu is held.
func (c *callCtx) cancelLocked(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.stopBase != nil {
		c.stopBase()
	}
	for _, a := range c.after {
		go a.f()
	}
	c.after = nil
}
