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

	promised atomic.Int64 // room promised to the idle caller (its peak), counted in b.promised
	closed   atomic.Bool

	mu    sync.Mutex // serializes counting and uncounting
	timer *time.Timer
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
		s.unpromise() // busy again: it holds what it was promised
		if !s.counted.Load() {
			s.mu.Lock()
			if !s.counted.Load() && !s.closed.Load() {
				s.counted.Store(true)
				b.busy.Add(1)
			}
			s.mu.Unlock()
		}
	}
	return true
}

// promise keeps the room the caller used (its peak) for its next calls
// while it is idle and counts as busy. What rules a promise out (a request
// in flight, the caller no longer counted, the share closed) is looked at
// after the promise is published, and whoever changes it takes the
// promise back after the change: so one of the two sees the other, and
// no promise outlives its caller's idleness without a lock.
func (s *Share) promise() {
	p := s.peak.Load()
	if p == 0 || !s.promised.CompareAndSwap(0, p) {
		return
	}
	s.b.promised.Add(p)
	if s.inflight.Load() != 0 || !s.counted.Load() || s.closed.Load() {
		s.unpromise()
	}
}

// unpromise takes back the room promised to the caller, if any.
func (s *Share) unpromise() {
	if s.promised.Load() == 0 {
		return
	}
	if p := s.promised.Swap(0); p != 0 {
		s.b.promised.Add(-p)
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
	s.promise()
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
	if s.closed.Load() || s.inflight.Load() > 0 {
		return // busy again: its next release arms the timer
	}
	if left := ShareLinger - time.Duration(time.Now().UnixNano()-s.idleAt.Load()); left > 0 {
		s.armed.Store(true)
		s.timer.Reset(left)
		return
	}
	if s.counted.Load() {
		s.counted.Store(false)
		s.b.busy.Add(-1)
	}
	s.unpromise() // after uncounting: see promise
	s.peak.Store(0)
}

// Close ends the caller's share: it no longer counts as busy. Requests it
// still has in flight may be released after.
func (s *Share) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed.Store(true)
	s.timer.Stop()
	if s.counted.Load() {
		s.counted.Store(false)
		s.b.busy.Add(-1)
	}
	s.unpromise() // after closing: see promise
}
