package runtime

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// callPeer sends m to p, and sends it again to the same run of p when the
// connection drops after m was written and refeed is set.
func (n *Node) callPeer(ctx context.Context, p *peer, m *Message, refeed bool) (*Message, error) {
	box := p.conn.Load()
	if box == nil {
		return nil, fmt.Errorf("%w: %s is not connected", ErrNotSent, p.addr)
	}
	inst := box.instance()
	reply, err := send(ctx, box.c, m)
	for refeed && inst != "" && lostAfterSent(err) && ctx.Err() == nil {
		// The connection dropped after the call was written: it may have
		// run. Send it again, same id, once the same run of p is back; its
		// de-duplication runs the call at most once. Another run of p (a
		// restart) does not know the call: it gets nothing.
		next := n.awaitReconnect(ctx, p, box, refeedWait(err))
		if next == nil || next.instance() != inst {
			break
		}
		box = next
		m.Flags |= FlagRetry
		n.stats.refeeds.Add(1)
		n.observeRefeed(ctx, p)
		lost := err
		reply, err = send(ctx, box.c, m)
		if errors.Is(err, ErrNotSent) || err == nil && reply != nil && reply.Flags&FlagRefused != 0 {
			// This copy was not sent, or refused unrun (the first may
			// still hold its place there), but the first may have run:
			// the call is lost, never "not sent" or refused (which would
			// let it go to another peer and run twice).
			return nil, lost
		}
	}
	return reply, err
}

// goneAway reports whether c's peer said goaway on it: that run of the
// peer is shutting down and will not take the call again.
func goneAway(c Conn) bool {
	g, ok := c.(GoAwayConn)
	return ok && g.GoAway()
}

// refeedWindow bounds how long a call whose connection was closed waits
// for the same run of its peer to come back, within the call's deadline,
// before it fails. The serving node remembers a call it ran for its
// de-duplication table's ttl (30s by default) whatever the answers
// filling the table, so a copy sent within this window runs at most
// once there (see [WithDedup]). A peer that went silent (it did not
// answer a ping in time) is likely cut off for longer: its calls wait
// silentRefeedWindow, so that they do not hold their callers through a
// partition.
const (
	refeedWindow       = 20 * time.Second
	silentRefeedWindow = time.Second
)

// refeedWait is how long a call lost with err waits for its peer.
func refeedWait(err error) time.Duration {
	var t interface{ Timeout() bool }
	if errors.As(err, &t) && t.Timeout() {
		return silentRefeedWindow
	}
	return refeedWindow
}

// lostAfterSent reports whether err says the connection was lost after the
// call was written (not refused with a code, not surely unsent).
func lostAfterSent(err error) bool {
	if err == nil {
		return false // before e below, which escapes: no allocation per call
	}
	var e *Error
	return !errors.Is(err, ErrNotSent) && !errors.As(err, &e)
}

// awaitReconnect waits until p has a connection other than old whose
// peer instance is known, polling with jittered backoff. It returns nil
// when ctx ends (the call's deadline), p leaves or discovery suspects it
// or reports it down (a partition: the caller learns at once that the
// call may have run, rather than holding it), a dial finds no one
// listening at p's address (the run it had is gone) or window passes.
func (n *Node) awaitReconnect(ctx context.Context, p *peer, old *connBox, window time.Duration) *connBox {
	const minWait, maxWait = time.Millisecond, 100 * time.Millisecond
	wait := minWait
	lost := time.Now()
	giveUp := lost.Add(window)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		if b := p.conn.Load(); b != nil && b != old && b.instance() != "" {
			select {
			case <-b.c.Done():
			default:
				return b
			}
		}
		left := time.Until(giveUp)
		if left <= 0 || p.refusedAt.Load() > lost.UnixNano() || goneAway(old.c) || p.suspect.Load() || p.down.Load() {
			return nil
		}
		t.Reset(min(wait/2+rand.N(wait/2+1), left))
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil
		case <-p.ctx.Done():
			return nil
		}
		wait = min(2*wait, maxWait)
	}
}
