package lb

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// LeastInFlight picks by the power of two choices: it draws two targets at
// random and takes the one with fewer calls in flight relative to its
// weight (a target of weight 2 is as loaded with 4 calls as one of weight
// 1 with 2). This spreads load nearly as well as asking every target, at
// O(1) per pick and without a herd on the one idlest target.
//
// By default the balancer counts calls itself: Pick counts one more for
// the target it returns and [LeastInFlight.Done] one fewer. A caller that
// already tracks in-flight calls per target passes a load function
// instead, and Done does nothing.
//
// If skip rejects the less loaded target, the other is offered; if both
// are rejected, two more are drawn, and then every target is walked from
// a random start. skip may be offered a target more than once in one
// Pick, but never after it accepted one. Pick is lock-free; Add and Remove
// copy the target list, O(n).
type LeastInFlight[T comparable] struct {
	load func(T) int

	mu    sync.RWMutex
	index map[T]*inFlight[T]             // guarded by mu
	list  []*inFlight[T]                 // guarded by mu; targets in no order
	table atomic.Pointer[[]*inFlight[T]] // an immutable copy of list
}

var _ Balancer[string] = (*LeastInFlight[string])(nil)

type inFlight[T comparable] struct {
	target T
	weight atomic.Int64
	calls  atomic.Int64 // unused when the balancer has a load function
}

// leastInFlightDraws is how many pairs Pick draws before it walks every
// target.
const leastInFlightDraws = 2

// NewLeastInFlight returns an empty least-in-flight balancer. load, if not
// nil, reports the calls in flight to a target; it must be safe for
// concurrent use and cheap, as Pick calls it twice. With a nil load, the
// balancer counts calls through Pick and Done. It cannot fail: every load,
// nil included, is valid.
func NewLeastInFlight[T comparable](load func(T) int) *LeastInFlight[T] {
	return &LeastInFlight[T]{load: load}
}

// Add puts t in the set with the given weight (below 1 counts as 1), or
// sets the weight of a t already there; it reports whether t is new.
func (b *LeastInFlight[T]) Add(t T, weight int) bool {
	weight = clampWeight(weight)
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.index[t]; ok {
		e.weight.Store(int64(weight))
		return false
	}
	if b.index == nil {
		b.index = make(map[T]*inFlight[T])
	}
	e := &inFlight[T]{target: t}
	e.weight.Store(int64(weight))
	b.index[t] = e
	b.list = append(b.list, e)
	b.publish()
	return true
}

// Remove takes t out of the set and reports whether it was there. Calls to
// t still in flight may still report Done; they are ignored.
func (b *LeastInFlight[T]) Remove(t T) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.index[t]
	if !ok {
		return false
	}
	delete(b.index, t)
	for i, x := range b.list {
		if x == e {
			last := len(b.list) - 1
			b.list[i] = b.list[last]
			b.list[last] = nil
			b.list = b.list[:last]
			break
		}
	}
	b.publish()
	return true
}

// publish stores a copy of list. The caller holds mu.
func (b *LeastInFlight[T]) publish() {
	l := append([]*inFlight[T](nil), b.list...)
	b.table.Store(&l)
}

// Len reports the number of targets.
func (b *LeastInFlight[T]) Len() int {
	if l := b.table.Load(); l != nil {
		return len(*l)
	}
	return 0
}

// Pick returns the less loaded of two random targets; key is ignored.
func (b *LeastInFlight[T]) Pick(_ string, skip func(T) bool) (T, bool) {
	var zero T
	lp := b.table.Load()
	if lp == nil || len(*lp) == 0 {
		return zero, false
	}
	l := *lp
	n := len(l)
	if n == 1 {
		return b.accept(l[0], skip)
	}
	for range leastInFlightDraws {
		i := rand.IntN(n)
		j := rand.IntN(n - 1)
		if j >= i {
			j++
		}
		first, second := l[i], l[j]
		if b.lighter(second, first) {
			first, second = second, first
		}
		if t, ok := b.accept(first, skip); ok {
			return t, true
		}
		if t, ok := b.accept(second, skip); ok {
			return t, true
		}
	}
	start := rand.IntN(n)
	for k := range n {
		if t, ok := b.accept(l[(start+k)%n], skip); ok {
			return t, true
		}
	}
	return zero, false
}

// lighter reports whether a has fewer calls in flight per unit of weight
// than c.
func (b *LeastInFlight[T]) lighter(a, c *inFlight[T]) bool {
	return b.calls(a)*c.weight.Load() < b.calls(c)*a.weight.Load()
}

func (b *LeastInFlight[T]) calls(e *inFlight[T]) int64 {
	if b.load != nil {
		return int64(min(max(b.load(e.target), 0), maxWeight))
	}
	return min(e.calls.Load(), maxWeight)
}

// accept offers e to skip and, when it is accepted, counts the call.
func (b *LeastInFlight[T]) accept(e *inFlight[T], skip func(T) bool) (T, bool) {
	if skip != nil && skip(e.target) {
		var zero T
		return zero, false
	}
	if b.load == nil {
		e.calls.Add(1)
	}
	return e.target, true
}

// Done reports that a call to t is over; it does nothing when the
// balancer has a load function or t is no longer in the set.
func (b *LeastInFlight[T]) Done(t T) {
	if b.load != nil {
		return
	}
	b.mu.RLock()
	e := b.index[t]
	b.mu.RUnlock()
	if e == nil {
		return
	}
	for {
		c := e.calls.Load()
		if c <= 0 || e.calls.CompareAndSwap(c, c-1) {
			return
		}
	}
}

// InFlight reports the calls in flight to t as the balancer sees them.
func (b *LeastInFlight[T]) InFlight(t T) int {
	b.mu.RLock()
	e := b.index[t]
	b.mu.RUnlock()
	if e == nil {
		return 0
	}
	return int(b.calls(e))
}
