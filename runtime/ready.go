package runtime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/patrun"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// Waiting for a ready target (WaitForReady): a call that finds no
// connected target, or whose attempts all failed without an answer
// because no target could take it, waits within its deadline for one to
// come back and is made again, instead of failing at once as
// unavailable. A call made again has surely not run, or is idempotent and
// pays for the new run from the retry budget, so a call that is not
// idempotent still runs at most once.

type waitForReadyOption struct{}

func (waitForReadyOption) applyCall(c *callConfig) { c.waitForReady = true }

// WaitForReady makes a remote call that finds no target that can take it
// (none connected: the peers serving it are restarting, or the broker
// they sit behind is) wait until one is back, within the call's deadline
// ([Timeout], the ctx's, else the node's default), and be made then,
// rather than fail at once as unavailable: gRPC's wait-for-ready. A call
// that may have run (its connection was lost after it was sent) is made
// again only when it is [Idempotent], within the retry budget; one that
// is not idempotent keeps running at most once (see [Idempotent] and
// refeeding in the package doc). A call whose wait outlasts its deadline
// fails with the deadline's code and the last error it met; a pattern
// that no known peer serves, while every known peer is reachable, fails
// at once as not found ([Node.WaitFor] waits for a service to join).
func WaitForReady() CallOption { return waitForReadyOption{} }

// readiness is what the attempts of a waiting call learnt: whether it
// failed for want of a target that could take it, and whether it may
// have run.
type readiness struct {
	unready    bool
	mayHaveRun bool
}

// unavailable records that the call failed for want of a target; a nil w
// (a call that does not wait) ignores it.
func (w *readiness) unavailable(mayHaveRun bool) {
	if w != nil {
		w.unready, w.mayHaveRun = true, w.mayHaveRun || mayHaveRun
	}
}

// Bounds of the wait between two tries of a waiting call: woken early
// when routing changes, it polls with jittered backoff in between (a
// target whose breaker opened is back without a routing change).
const (
	minReadyWait = time.Millisecond
	maxReadyWait = 100 * time.Millisecond
)

// callReady runs a WaitForReady call on the route that a.pairs find,
// waiting for a ready target and trying again while its tries fail for
// want of one.
func (n *Node) callReady(ctx context.Context, a *callArgs) (Result, error) {
	own := *a // its tries change the route and the options: its own copy
	a, cfg := &own, a.cfg
	if n.remote == nil {
		plain := *cfg
		plain.waitForReady = false
		a.cfg = &plain
		return n.callRoute(ctx, a.r, a.pairs, a.msg, a.over, a.cfg)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := n.remote.callContext(ctx, cfg) // the wait is within the call's deadline
	defer cancel()
	var w readiness
	try := *cfg
	try.ready = &w
	a.cfg = &try
	wt := readyWait{n: n, pairs: a.pairs, wait: minReadyWait}
	defer wt.stop()
	for {
		w = readiness{}
		res, err := n.callRoute(ctx, a.r, a.pairs, a.msg, a.over, a.cfg)
		if err == nil || !w.unready || ctx.Err() != nil {
			return res, err
		}
		paid := w.mayHaveRun
		if paid && (!cfg.idempotent || !n.remote.budget.withdraw()) {
			return res, err // run again only if idempotent, and within the retry budget
		}
		n.stats.readyWaits.Add(1)
		if a.r = wt.next(ctx); a.r == nil {
			if paid {
				n.remote.budget.refund() // not run again after all
			}
			if n.closed.Load() {
				return Result{}, errClosed()
			}
			return Result{}, n.waitEnded(ctx, a.pairs, err)
		}
	}
}

// readyWait is the wait of a WaitForReady call between two tries.
type readyWait struct {
	n     *Node
	pairs []pattern.Pair
	wait  time.Duration
	timer *time.Timer
}

// next waits at least until routing changes or the backoff passes, then
// until the call's route is ready, and returns it; nil when ctx ends or
// the node closes first.
func (w *readyWait) next(ctx context.Context) *route {
	if w.timer == nil {
		w.timer = time.NewTimer(time.Hour)
	}
	for {
		w.n.routeMu.Lock()
		changed := w.n.changed
		w.n.routeMu.Unlock()
		w.timer.Reset(w.wait/2 + rand.N(w.wait/2+1))
		select {
		case <-changed:
			w.timer.Stop()
		case <-w.timer.C:
			w.wait = min(2*w.wait, maxReadyWait)
		case <-ctx.Done():
			return nil
		}
		if w.n.closed.Load() {
			return nil
		}
		if r := w.n.find(w.pairs); w.n.ready(r) {
			return r
		}
	}
}

func (w *readyWait) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// ready reports whether a call on r could be made now: r has a local
// handler, or a peer with a live connection.
func (n *Node) ready(r *route) bool {
	if r == nil {
		return false
	}
	if r.local.Load() != nil {
		return true
	}
	ps := r.peers.Load()
	if ps == nil {
		return false
	}
	for _, p := range *ps {
		if b := p.conn.Load(); b != nil {
			select {
			case <-b.c.Done():
			default:
				return true
			}
		}
	}
	return false
}

// waitEnded is the error of a waiting call whose deadline ended while it
// waited for a target, after its last try failed with last.
func (n *Node) waitEnded(ctx context.Context, pairs []pattern.Pair, last error) error {
	err := ctx.Err()
	return &Error{Code: CodeOf(err), Message: fmt.Sprintf("wizard: call %s: %v while it waited for a target that could take it (last error: %v)", quoteClipped(string(patrun.AppendCanonical(nil, pairs)), maxEcho), err, last), cause: err}
}

// giveUp is exhausted, recorded for a waiting call: one that failed as
// unavailable failed for want of a target.
func (c *remoteCall) giveUp(ctx context.Context) (Result, error) {
	res, err := c.exhausted(ctx)
	if e, ok := errors.AsType[*Error](err); ok && e.Code == CodeUnavailable {
		c.cfg.ready.unavailable(c.mayHaveRun)
	}
	return res, err
}
