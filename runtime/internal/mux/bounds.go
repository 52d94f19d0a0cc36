package mux

import (
	"slices"
	"sync"
	"sync/atomic"
)

// Bounds are the bounds of one connection made of several streams (a
// QUIC connection): the servers of its streams draw from them, so that
// the connection costs what one stream alone may ([Options.MaxInFlight]
// handlers running, [Options.MaxQueued] bytes of frames waiting to be
// written and as many of requests waiting for a handler), however many
// streams its client opens. A stream whose requests find no room, or
// whose reader stops at a bound, is listed; when another stream frees
// room (a handler returns, its writer catches up, a waiting request
// starts), a goroutine of the Bounds' own looks at the listed streams
// again, so that no stream's lock is taken under another's. While
// streams wait for a handler slot, a stream whose handler returns gives
// its slot up rather than keep it for its own next request, so that one
// busy stream does not hold the others back.
type Bounds struct {
	maxInFlight int64
	maxQueued   int64

	running atomic.Int64 // handlers running on the streams
	queued  atomic.Int64 // bytes of frames waiting for the streams' writers
	waiting atomic.Int64 // bytes of requests waiting for a handler
	listed  atomic.Int64 // len(waiters)

	mu      sync.Mutex
	waiters []*server // streams to look at again when room frees, in the order they came
	kicking bool      // a goroutine looks at waiters
	again   bool      // room freed while it did
}

// NewBounds returns the bounds of a connection made of several streams:
// maxInFlight handlers running at once, maxQueued bytes of frames
// waiting to be written and as many of requests waiting for a handler; 0
// means [DefaultMaxInFlight] and [DefaultMaxQueued]. The servers of the
// streams get it as [Options.Bounds], in place of their own MaxInFlight
// and MaxQueued.
func NewBounds(maxInFlight, maxQueued int) *Bounds {
	if maxInFlight <= 0 {
		maxInFlight = DefaultMaxInFlight
	}
	if maxQueued <= 0 {
		maxQueued = DefaultMaxQueued
	}
	return &Bounds{maxInFlight: int64(maxInFlight), maxQueued: int64(maxQueued)}
}

// take counts a handler running, unless maxInFlight run; it reports
// whether it did.
func (b *Bounds) take() bool {
	for {
		n := b.running.Load()
		if n >= b.maxInFlight {
			return false
		}
		if b.running.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release counts a handler of stream c as returned.
func (b *Bounds) release(c *conn) {
	b.running.Add(-1)
	b.signal(c)
}

// addQueued counts n bytes of frames queued for stream c's writer (n < 0:
// written).
func (b *Bounds) addQueued(c *conn, n int) {
	b.queued.Add(int64(n))
	if n < 0 {
		b.signal(c)
	}
}

// addWaiting counts n bytes of requests waiting for a handler on stream c
// (n < 0: started or dropped).
func (b *Bounds) addWaiting(c *conn, n int) {
	b.waiting.Add(int64(n))
	if n < 0 {
		b.signal(c)
	}
}

// room reports whether a request may start: a handler slot is free and
// the frames waiting to be written are below their bound.
func (b *Bounds) room() bool { return b.running.Load() < b.maxInFlight && !b.full() }

// full reports whether the frames waiting to be written reach their bound.
func (b *Bounds) full() bool { return b.queued.Load() >= b.maxQueued }

// waitingFull reports whether the requests waiting for a handler reach
// their bound.
func (b *Bounds) waitingFull() bool { return b.waiting.Load() >= b.maxQueued }

// list adds s to the streams to look at again when room frees, unless it
// is listed. Its caller holds s.c.mu and looks at the bounds again after
// it: room freed before s was listed is seen there, room freed after
// finds s listed.
func (b *Bounds) list(s *server) {
	b.mu.Lock()
	if !s.listed {
		s.listed = true
		b.waiters = append(b.waiters, s)
		b.listed.Add(1)
	}
	b.mu.Unlock()
}

// listLast lists s behind every stream listed now, as a stream that gives
// its handler slot up does.
func (b *Bounds) listLast(s *server) {
	b.mu.Lock()
	if i := slices.Index(b.waiters, s); i >= 0 {
		b.waiters = append(slices.Delete(b.waiters, i, i+1), s)
	} else {
		s.listed = true
		b.waiters = append(b.waiters, s)
		b.listed.Add(1)
	}
	b.mu.Unlock()
}

// others reports whether streams other than s are listed.
func (b *Bounds) others(s *server) bool {
	if b.listed.Load() == 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters) > 1 || (len(b.waiters) == 1 && b.waiters[0] != s)
}

// unlist takes s off the list: it has had its turn, or its connection has
// ended.
func (b *Bounds) unlist(s *server) {
	b.mu.Lock()
	if i := slices.Index(b.waiters, s); i >= 0 {
		b.waiters = slices.Delete(b.waiters, i, i+1)
		b.listed.Add(-1)
	}
	s.listed = false
	b.mu.Unlock()
}

// signal has the listed streams looked at again, room having freed on
// stream c (nil: on none of them). It takes no stream's lock, so that a
// stream may call it with its own held. When c's stream is the only one
// listed, it looks for itself, as a stream alone does.
func (b *Bounds) signal(c *conn) {
	if b.listed.Load() == 0 {
		return
	}
	b.mu.Lock()
	if len(b.waiters) == 0 || (len(b.waiters) == 1 && b.waiters[0].c == c) {
		b.mu.Unlock()
		return
	}
	if b.kicking {
		b.again = true
		b.mu.Unlock()
		return
	}
	b.kicking = true
	b.mu.Unlock()
	go b.kick()
}

// kick looks at the listed streams again, in the order they were listed,
// and again while room freed meanwhile and streams are listed: each
// starts the requests it has room for and wakes its reader. A stream
// stays listed, in its place, until it has started every request
// waiting, so that the streams listed behind it, and those not listed,
// do not take its room meanwhile.
func (b *Bounds) kick() {
	for {
		b.mu.Lock()
		ws := slices.Clone(b.waiters)
		b.again = false
		b.mu.Unlock()
		for _, s := range ws {
			s.kicked()
		}
		b.mu.Lock()
		if !b.again || len(b.waiters) == 0 {
			b.kicking = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
	}
}

// The server's side of its bounds: its own (Options.MaxInFlight and
// MaxQueued), or its connection's when it is one of several streams
// (Options.Bounds). Callers hold c.mu.

// addQueued counts n bytes of frames queued for the writer (n < 0:
// written).
func (c *conn) addQueued(n int) {
	c.queued += n
	if b := c.opts.Bounds; b != nil {
		b.addQueued(c, n)
	}
}

// full reports whether the frames waiting to be written reach their
// bound: no request starts, and the server's reader stops.
func (c *conn) full() bool {
	if b := c.opts.Bounds; b != nil {
		return b.full()
	}
	return c.queued >= c.opts.MaxQueued
}

// addWaiting counts n bytes of requests waiting for a handler (n < 0:
// started or dropped).
func (s *server) addWaiting(n int) {
	s.waiting += n
	if b := s.c.opts.Bounds; b != nil {
		b.addWaiting(s.c, n)
	}
}

// waitingFull reports whether the requests waiting for a handler reach
// their bound: the reader stops.
func (s *server) waitingFull() bool {
	if b := s.c.opts.Bounds; b != nil {
		return b.waitingFull()
	}
	return s.waiting >= s.c.opts.MaxQueued
}

// atBound reports whether the reader stops: requests or answers wait at
// their bound.
func (s *server) atBound() bool { return s.waitingFull() || s.c.full() }

// takeSlot counts a handler running, unless MaxInFlight run; it reports
// whether it did.
func (s *server) takeSlot() bool {
	if b := s.c.opts.Bounds; b != nil {
		if !b.take() {
			return false
		}
	} else if s.running >= s.c.opts.MaxInFlight {
		return false
	}
	s.running++
	return true
}

// freeSlot counts a handler as returned.
func (s *server) freeSlot() {
	s.running--
	if b := s.c.opts.Bounds; b != nil {
		b.release(s.c)
	}
}

// roomToStart takes a handler slot for a request when the answers are
// below their bound. On a stream of a connection (Options.Bounds), other
// streams listed for room go first, unless turn says that the bounds are
// looking at this one: it lists itself behind them and, if there is
// room, has the bounds look. When there is no room it lists the stream,
// so that the bounds look at it again once another stream frees room,
// and looks once more: room freed before it was listed.
func (s *server) roomToStart(turn bool) bool {
	b := s.c.opts.Bounds
	if b == nil {
		return !s.c.full() && s.takeSlot()
	}
	if !turn && b.others(s) {
		b.list(s)
		if b.room() {
			b.signal(nil) // the listed streams take it in turn; else the next room freed signals
		}
		return false
	}
	if !s.c.full() && s.takeSlot() {
		return true
	}
	b.list(s)
	return !s.c.full() && s.takeSlot()
}

// yields reports whether a handler slot that just freed goes to another
// stream of the connection, listed because it found none, rather than to
// this one's next request.
func (s *server) yields() bool {
	b := s.c.opts.Bounds
	return b != nil && b.others(s)
}

// kicked is [Bounds]' look at a listed stream once another freed room: it
// starts the requests there is room for and wakes the reader if it is
// below its bounds now. It stays listed while requests wait, or while the
// reader waits.
func (s *server) kicked() {
	c := s.c
	c.mu.Lock()
	s.startWaiting(true)
	held := c.paused && s.atBound()
	if !held {
		c.wakeLocked()
		if len(s.pending) == 0 {
			c.opts.Bounds.unlist(s)
		}
	}
	c.mu.Unlock()
}

// leaveBounds gives back what the stream, ended, still counts in its
// connection's bounds: frames never written. Every handler has returned
// and no request waits.
func (s *server) leaveBounds() {
	c := s.c
	b := c.opts.Bounds
	if b == nil {
		return
	}
	c.mu.Lock()
	c.addQueued(-c.queued)
	c.mu.Unlock()
	b.unlist(s)
}
