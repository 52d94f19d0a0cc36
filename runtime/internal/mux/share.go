package mux

import (
	"sync"
	"sync/atomic"
	"time"
)

// Budget is a node's limit on the requests it serves at once, divided
// fairly among its callers, so that a flood from one caller does not take
// the room of the others. Each caller holds a [Share] (a TCP connection
// gets one, a QUIC connection one for all its streams). A caller is busy
// while it has requests in flight and for [ShareLinger] after (a caller
// between two calls keeps its part); each busy caller may hold an equal
// part of the limit less a reserve of one eighth, kept for callers that
// are not busy yet: they find room at once, rather than being refused
// because a flood holds every slot. A request beyond its caller's part is
// refused at once without running (an error frame flagged
// [wire.FlagRefused], as a node over its limit answers), so that the
// caller may go elsewhere.
//
// A caller alone may so hold seven eighths of the limit, two busy callers
// seven sixteenths each, and so on; each gets at least one request.
type Budget struct {
	shared int64        // the limit less the reserve
	busy   atomic.Int64 // callers counted as busy
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
	counted  atomic.Bool  // counted in b.busy
	idleAt   atomic.Int64 // when inflight last fell to 0, in Unix nanoseconds
	armed    atomic.Bool  // timer is armed, or about to be

	mu     sync.Mutex // serializes counting and uncounting
	timer  *time.Timer
	closed bool
}

// take counts a request in flight, unless the caller already holds its
// part of the budget; it reports whether it did.
func (s *Share) take() bool {
	b := s.b
	n := s.inflight.Load()
	busy := b.busy.Load()
	if !s.counted.Load() {
		busy++ // this caller becomes busy
	}
	if n >= max(1, b.shared/max(busy, 1)) {
		return false
	}
	if s.inflight.Add(1) == 1 && !s.counted.Load() {
		s.mu.Lock()
		if !s.counted.Load() && !s.closed {
			s.counted.Store(true)
			b.busy.Add(1)
		}
		s.mu.Unlock()
	}
	return true
}

// release counts a request as answered.
func (s *Share) release() { s.releaseAt(time.Time{}) }

// releaseAt counts a request answered at now as answered; a zero now
// reads the clock, when the caller becomes idle. A server gives the time
// its reader read a request it served inline (see server.arrival): at
// most the hand-over bound and the requests read with it earlier than
// the answer, so that the caller's linger may end as much sooner.
func (s *Share) releaseAt(now time.Time) {
	if s.inflight.Add(-1) != 0 {
		return
	}
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
	if s.counted.Load() {
		s.counted.Store(false)
		s.b.busy.Add(-1)
	}
}
