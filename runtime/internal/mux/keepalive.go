package mux

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// keeper is keep-alive's state: a timer whose function looks at the
// connection, rather than a goroutine per connection waiting on it (an
// idle connection's goroutines are most of what it costs the server).
//
// keep-alive pings the peer every KeepAlive and fails the connection when
// a ping goes unanswered for KeepAliveTimeout.
//
// While this side waits on the peer (the client has calls pending), it
// checks every BusyKeepAlive instead, pings when nothing came from the
// peer since the last check, and gives the peer BusyKeepAliveTimeout to
// answer: a peer gone silent under calls is found in about a second,
// not KeepAlive+KeepAliveTimeout. (A server whose reader paused because
// MaxQueued bytes of requests wait for its handlers cannot read the ping
// either: its client takes it for dead when no answer comes meanwhile.)
//
// A ping whose pong is late gets another timeout, as often as needed, when
// this side read a frame meanwhile (the peer is alive, its pong is behind
// other frames), or when the ping left (was flushed) and this side's
// reader paused meanwhile because requests wait for its handlers (the
// pong may be waiting behind requests not read yet). A ping that did not
// leave in time fails the connection, unless a frame came meanwhile: a
// server whose reader paused because requests wait for its handlers,
// which therefore reads no ping, sends a pong of id 0 every BusyKeepAlive
// while it is paused so (see server.aliveLocked), as callers that send
// faster than its handlers run (no-reply requests) keep it paused.
//
// A busy ping unanswered after BusyKeepAliveTimeout gets KeepAliveTimeout
// from the ping, once, when the peer's host has acknowledged at the TCP
// level everything this side sent, or something since the ping was pushed
// (see hostAcked): the host is up and reachable, and the peer's process,
// or this one, is behind (a starved CPU, a CPU quota, a long GC; a ping
// not written yet because this side's writer did not run, or waits for
// the peer's window). Closing the connection would only add work: its
// calls fail and are sent again on a new connection the slow process must
// accept, and its peers drop what they learnt over the old one. A
// partitioned or frozen host acknowledges nothing (the ping, or the
// request that made this side busy, stays unacknowledged) and is still
// found within 2×BusyKeepAlive+BusyKeepAliveTimeout of its last frame; a
// process that has exited closes its sockets, found at once.
//
// The client's idempotent calls do not wait out that longer timeout: they
// fail with [ErrStalled] when it is granted (see [Client.abandonStalled]),
// and their node sends them elsewhere. Answers lost on their way back look
// the same from here (the host acknowledges the ping, no answer comes: TCP
// resends a segment lost again and again ever more slowly, seconds apart),
// and such a call would otherwise wait out its deadline for them.
type keeper struct {
	// mu guards what follows; it is taken before c.mu, never while c.mu
	// is held (see [conn.busyLocked]).
	mu      sync.Mutex
	t       atomic.Pointer[time.Timer] // runs tick; nil when keep-alive is off or not started yet
	due     time.Time                  // when t is due: an earlier run of tick is a wake, not a look
	stopped bool                       // the connection ended: tick does nothing
	id      uint64                     // of the last ping
	holds   uint64                     // c.holds when it was pushed
	waiting bool                       // a ping is out, its pong not back
	timeout time.Duration              // of the ping out
	last    time.Time                  // when the last ping was pushed

	// busy is set, with c.mu held, when a call starts waiting while
	// armed; tick, woken at once, takes it.
	busy atomic.Bool
}

// keepAlive starts keep-alive, its first look KeepAlive from now, and
// releases the count of c.wg its caller took for it: it returns at once,
// and the connection's end stops keep-alive (see [conn.stopKeepAlive]).
func (c *conn) keepAlive() {
	defer c.wg.Done()
	k := &c.ka
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return
	}
	k.timeout = c.opts.KeepAliveTimeout
	k.due = time.Now().Add(c.opts.KeepAlive)
	t := time.AfterFunc(c.opts.KeepAlive, c.tick)
	k.t.Store(t)
	if k.busy.Load() { // a call started waiting before the timer was there
		t.Reset(0)
	}
}

// arm sets keep-alive's next look d from now; k.mu is held.
func (k *keeper) arm(d time.Duration) {
	k.due = time.Now().Add(d)
	k.t.Load().Reset(d)
}

// tick is keep-alive's timer function: it takes a busy signal, and looks
// at the connection when the timer is due.
func (c *conn) tick() {
	k := &c.ka
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		return
	}
	if k.busy.Swap(false) && !k.waiting {
		k.arm(c.opts.BusyKeepAlive)
		k.mu.Unlock()
		return
	}
	if now := time.Now(); now.Before(k.due) {
		// Woken by a busy signal while a ping is out, or a run of an
		// earlier arming: not due yet.
		k.t.Load().Reset(k.due.Sub(now))
		k.mu.Unlock()
		return
	}
	busy := c.waitingOnPeer()
	switch {
	case k.waiting:
		h := c.holds.Load()
		if c.read.Swap(false) || c.pingSent.Load() == k.id && (h != k.holds || h&1 == 1) {
			k.holds = h
			k.arm(k.timeout)
			break
		}
		since := time.Since(k.last)
		if since < k.timeout {
			k.arm(k.timeout - since)
			break
		}
		if k.timeout < c.opts.KeepAliveTimeout && since < c.opts.KeepAliveTimeout && c.hostAcked(since) {
			k.timeout = c.opts.KeepAliveTimeout // once: the host is up, its process slow
			k.arm(k.timeout - since)
			if c.stalled != nil {
				c.stalled() // idempotent calls go elsewhere meanwhile
			}
			break
		}
		k.stopped = true
		k.mu.Unlock()
		c.fail(ErrKeepAliveTimeout)
		return
	case busy && c.read.Swap(false):
		k.arm(c.opts.BusyKeepAlive) // the peer spoke meanwhile
	case busy || time.Since(k.last) >= c.opts.KeepAlive:
		k.id++
		k.waiting, k.holds, k.last = true, c.holds.Load(), time.Now()
		k.timeout = c.opts.KeepAliveTimeout
		if busy {
			k.timeout = c.opts.BusyKeepAliveTimeout
		}
		c.read.Store(false)
		c.pushControl(wire.TypePing, k.id)
		k.arm(k.timeout)
	default:
		k.arm(c.opts.KeepAlive - time.Since(k.last))
	}
	k.mu.Unlock()
}

// hostAcked reports whether the peer's host acknowledged, at the TCP
// level, everything this side sent, or anything within the last d.
func (c *conn) hostAcked(d time.Duration) bool {
	if c.opts.hostAcked != nil {
		return c.opts.hostAcked(d)
	}
	return hostAcked(c.rw, d)
}

// busyLocked tells keep-alive that a call started waiting while armed;
// c.mu is held, so it only sets a flag and wakes the timer.
func (c *conn) busyLocked() {
	if c.opts.KeepAlive <= 0 {
		return
	}
	c.ka.busy.Store(true)
	if t := c.ka.t.Load(); t != nil { // nil: keep-alive has not started yet, and takes the flag when it does
		t.Reset(0)
	}
}

// pong hands a pong's id to keep-alive.
func (c *conn) pong(id uint64) {
	k := &c.ka
	k.mu.Lock()
	if !k.stopped && k.t.Load() != nil && k.waiting && id == k.id {
		k.waiting = false
		k.arm(c.interval())
	}
	k.mu.Unlock()
}

// stopKeepAlive stops keep-alive for good: a tick already running ends
// before it returns, later ones do nothing.
func (c *conn) stopKeepAlive() {
	k := &c.ka
	k.mu.Lock()
	k.stopped = true
	if t := k.t.Load(); t != nil {
		t.Stop()
	}
	k.mu.Unlock()
}
