package mux

import (
	"sync"
	"sync/atomic"
	"time"
)

// Budget is a node's limit on the requests it serves at once, divided
// fairly among its callers once it fills, so that a flood from one caller
// does not take the room of the others. Each caller holds a [Share] (a
// TCP connection gets one, a QUIC connection one for all its streams). A
// caller is busy while it has requests in flight and for [ShareLinger]
// after; each busy caller's part is an equal part of the limit less a
// reserve of one eighth, kept for callers that are not busy yet: they
// find room at once, rather than being refused because a flood holds
// every slot. A request beyond its caller's part is refused at once
// without running (an error frame flagged [wire.FlagRefused], as a node
// over its limit answers), so that the caller may go elsewhere, but only
// while the node is full: while the requests in flight, and the room
// promised to callers between two calls, fall short of the limit less the
// reserve, nobody is refused.
//
// A caller between two calls (idle, and still busy for ShareLinger) is
// promised the room it used: the most requests it had in flight at once
// since it became busy, not a whole part. So a flood cannot take the room
// of a caller that pauses between its calls, and a thousand callers that
// had a call each and went idle hold a thousand requests' room, not the
// whole limit in parts of three.
//
// A caller alone may so hold seven eighths of the limit; with two busy
// callers on a full node, one keeps at most seven sixteenths while the
// other wants more, and so on; each gets at least one request.
type Budget struct {
	shared   int64        // the limit less the reserve
	busy     atomic.Int64 // callers counted as busy
	inflight atomic.Int64 // requests in flight over every share
	promised atomic.Int64 // room promised to idle busy callers (Share.promised)
}

// ShareLinger is how long a caller counts as busy after its last request
// in flight has been answered.
const ShareLinger = time.Second

// NewBudget returns a budget of limit requests in flight, limit > 0.
func NewBudget(limit int) *Budget {
	reserve := (int64(limit) + 7) / 8
	return &Budget{shared: int64(limit) - reserve}
}

// Share returns a new caller's share of b. [Share.Close] it when the
// caller's connection has ended.
func (b *Budget) Share() *Share {
	s := &Share{b: b}
	s.timer = time.AfterFunc(time.Hour, s.expire)
	s.timer.Stop()
	return s
}

// Share is one caller's part of a [Budget]; the servers of that caller's
// connections (or streams) share it.
type Share struct {
	b        *Budget
	inflight atomic.Int64
	peak     atomic.Int64 // the most requests in flight at once since the caller became busy
	counted  atomic.Bool  // counted in b.busy
	idleAt   atomic.Int64 // when inflight last fell to 0, in Unix nanoseconds
	armed    atomic.Bool  // timer is armed, or about to be

	mu       sync.Mutex // serializes counting and uncounting, promising and taking back
	timer    *time.Timer
	closed   bool
	promised int64 // room promised to the caller while it is idle (its peak), counted in b.promised
}

// take counts a request in flight, unless the caller already holds its
// part of the budget and the budget is full; it reports whether it did.
func (s *Share) take() bool {
	b := s.b
	n := s.inflight.Load()
	busy := b.busy.Load()
	if !s.counted.Load() {
		busy++ // this caller becomes busy
	}
	if n >= max(1, b.shared/max(busy, 1)) && b.inflight.Load()+b.promised.Load() >= b.shared {
		return false
	}
	b.inflight.Add(1)
	n = s.inflight.Add(1)
	for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
	}
	if n == 1 {
		s.mu.Lock()
		s.unpromiseLocked() // busy again: it holds what it was promised
		if !s.counted.Load() && !s.closed {
			s.counted.Store(true)
			b.busy.Add(1)
		}
		s.mu.Unlock()
	}
	return true
}

// unpromiseLocked takes back the room promised to the idle caller; s.mu
// is held.
func (s *Share) unpromiseLocked() {
	if s.promised != 0 {
		s.b.promised.Add(-s.promised)
		s.promised = 0
	}
}

// release counts a request as answered.
func (s *Share) release() { s.releaseAt(time.Time{}) }

// releaseAt counts a request answered at now as answered; a zero now
// reads the clock, when the caller becomes idle. A server gives the time
// its reader read a request it served inline (see server.arrival): at
// most the hand-over bound and the requests read with it earlier than
// the answer, so that the caller's linger may end as much sooner.
func (s *Share) releaseAt(now time.Time) {
	s.b.inflight.Add(-1)
	if s.inflight.Add(-1) != 0 {
		return
	}
	s.mu.Lock()
	if s.counted.Load() && !s.closed && s.promised == 0 && s.inflight.Load() == 0 {
		// Idle: the room it used is kept for its next calls while it
		// counts as busy.
		s.promised = s.peak.Load()
		s.b.promised.Add(s.promised)
	}
	s.mu.Unlock()
	if now.IsZero() {
		now = time.Now()
	}
	s.idleAt.Store(now.UnixNano())
	if !s.armed.Swap(true) {
		s.timer.Reset(ShareLinger)
	}
}

// expire stops counting the caller as busy once it has been idle for
// ShareLinger.
func (s *Share) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed.Store(false) // before looking: a release from now on arms again
	if s.closed || s.inflight.Load() > 0 {
		return // busy again: its next release arms the timer
	}
	if left := ShareLinger - time.Duration(time.Now().UnixNano()-s.idleAt.Load()); left > 0 {
		s.armed.Store(true)
		s.timer.Reset(left)
		return
	}
	s.unpromiseLocked()
	s.peak.Store(0)
	if s.counted.Load() {
		s.counted.Store(false)
		s.b.busy.Add(-1)
	}
}

// Close ends the caller's share: it no longer counts as busy. Requests it
// still has in flight may be released after.
func (s *Share) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.timer.Stop()
	s.unpromiseLocked()
	if s.counted.Load() {
		s.counted.Store(false)
		s.b.busy.Add(-1)
	}
}
