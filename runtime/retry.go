package runtime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// What a remote call does after an attempt: the decision (next), the
// retry budget for calls that may have run, the backoff before such a
// retry, and the error of a call no target could take (exhausted).

// step is what a remote call does after an attempt.
type step uint8

const (
	stepNext   step = iota // try another target
	stepDone               // the call is over: its result is final
	stepGiveUp             // stop trying: the call fails with what its attempts learnt
)

// next decides what an attempt's outcome means for the call. A call that
// surely did not run (refused, or never sent) goes to the next target; one
// that may have run goes to another only when it is idempotent, within the
// retry budget and after a backoff; an answer, a code from the transport
// or the caller's end is final.
func (c *remoteCall) next(ctx context.Context, o outcome) (step, Result, error) {
	switch o.kind {
	case outAnswered:
		res, err := answer(o.reply, c.n.peerTypes)
		return stepDone, res, err
	case outRefused:
		// Shed by an overloaded node, not served there any more, or
		// closing: another target may take it.
		c.refused++
		switch o.reply.Code {
		case CodeResourceExhausted:
			c.overloaded++
		case CodeNotFound:
			o.peer.signalRefetch() // its catalog changed
		}
		c.lastRefusal = &Error{Code: o.reply.Code, Message: o.reply.Error}
		if o.reply.Code == CodeNotFound {
			c.lastRefusal.cause = ErrNoHandler // refused unrun: the peer has no handler for it
		}
		c.lastErr = c.lastRefusal
		return stepNext, Result{}, nil
	case outUnsent:
		c.lastErr = o.err
		return stepNext, Result{}, nil
	case outCoded:
		var e *Error
		errors.As(o.err, &e)
		return stepDone, Result{}, e
	case outEnded:
		ctxErr := ctx.Err()
		msg := fmt.Sprintf("wizard: call %q to %s: %v", c.m.Pattern, o.peer.addr, ctxErr)
		if lostAfterSent(o.err) && !errors.Is(o.err, ctxErr) {
			// It waited for its peer to come back to send it again.
			msg += fmt.Sprintf(" waiting for the peer to come back; the call may have run (%v)", o.err)
		}
		return stepDone, Result{}, &Error{Code: CodeOf(ctxErr), Message: msg, cause: ctxErr}
	}
	// Lost after it was written: it may have run.
	c.mayHaveRun = true
	if !c.cfg.idempotent {
		return stepDone, Result{}, &Error{Code: CodeUnavailable, Message: fmt.Sprintf("wizard: call %q to %s: %v", c.m.Pattern, o.peer.addr, o.err), cause: o.err}
	}
	// Safe to run again elsewhere, within the retry budget. (Refused and
	// unsent calls cost their target nothing and go on without it.)
	c.lastErr = o.err
	c.stalled = nil
	if stalledConn(o.err) {
		c.stalled = o.peer
	}
	if !c.n.remote.budget.withdraw() {
		c.lastErr = fmt.Errorf("retry budget spent, last error: %w", o.err)
		return stepGiveUp, Result{}, nil
	}
	c.withdrawn = true
	if !retryBackoff(ctx, c.attempts-1) {
		return stepGiveUp, Result{}, nil
	}
	return stepNext, Result{}, nil
}

// exhausted is the error of a call that no target took: every target
// refused it (as overloaded, or as the last one said), the caller's
// context ended, or no target could take it.
func (c *remoteCall) exhausted(ctx context.Context) (Result, error) {
	name, tried := c.m.Pattern, len(c.tried)
	if c.refused > 0 && c.refused == tried {
		if c.overloaded == tried {
			return Result{}, &Error{Code: CodeResourceExhausted, Message: fmt.Sprintf("wizard: every target serving %q refused the call as overloaded (%d tried)", name, tried), cause: ErrResourceExhausted}
		}
		return Result{}, c.lastRefusal // as the last target refused it
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return Result{}, &Error{Code: CodeOf(ctxErr), Message: fmt.Sprintf("wizard: call %q: %v (last error: %v)", name, ctxErr, c.lastErr), cause: ctxErr}
	}
	lastErr := c.lastErr
	if lastErr == nil {
		lastErr = errors.New("no target is connected: " + listPeers(c.n.routeStates(c.r)))
	}
	if c.mayHaveRun && errors.Is(lastErr, ErrNotSent) {
		// An earlier attempt may have run: the call must not match
		// ErrNotSent, whatever the last attempt met.
		lastErr = errors.New(lastErr.Error())
	}
	return Result{}, &Error{Code: CodeUnavailable, Message: fmt.Sprintf("wizard: no peer serving %q could take the call (%d tried): %v", name, tried, lastErr), cause: lastErr}
}

// retryBudget bounds the retries of calls that may have run (idempotent
// calls whose connection was lost): every remote call adds a tenth of a
// token, such a retry takes one whole token, and the bucket holds at most
// ten, so they stay within about 10% of calls plus a burst of ten. Calls
// refused by their target or never sent go to the next target without
// it: they cost their target nothing, and each target is tried once.
type retryBudget struct {
	milli atomic.Int64 // thousandths of a token
}

const (
	budgetDeposit = 100
	budgetCost    = 1000
	budgetCap     = 10 * budgetCost
)

func newRetryBudget() *retryBudget {
	b := new(retryBudget)
	b.milli.Store(budgetCap)
	return b
}

func (b *retryBudget) deposit() {
	if b.milli.Load() < budgetCap {
		b.milli.Add(budgetDeposit)
	}
}

// refund gives back a withdrawal that paid for no retry.
func (b *retryBudget) refund() { b.milli.Add(budgetCost) }

// withdraw takes the cost of one retry, or reports false.
func (b *retryBudget) withdraw() bool {
	for {
		v := b.milli.Load()
		if v < budgetCost {
			return false
		}
		if b.milli.CompareAndSwap(v, v-budgetCost) {
			return true
		}
	}
}

// retryBackoff waits before the retry after attempt: full jitter over an
// exponential bound (2ms, 4ms, … 100ms). It reports false when ctx ends
// first.
func retryBackoff(ctx context.Context, attempt int) bool {
	bound := min(2*time.Millisecond<<min(attempt, 6), 100*time.Millisecond)
	t := time.NewTimer(rand.N(bound) + 1)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// stalledConn reports whether err is a transport's for an idempotent call
// given up on a stalled connection that stays (the peer's host took the
// call, no answer came): the call may go to that peer again when no other
// can take it.
func stalledConn(err error) bool {
	var s interface{ Stalled() bool }
	return errors.As(err, &s) && s.Stalled()
}
