package lb

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// Random picks targets at random, each with a probability proportional to
// its weight (uniformly when all weights are equal). Pick is O(1) and
// lock-free (Walker's alias method over an immutable table); Add and
// Remove rebuild the table, O(n).
//
// A target that skip rejects is followed by a few more random draws, then
// by a walk over every target from a random start, so Pick fails only
// when skip rejects every target. skip may be offered a target more than
// once in one Pick, but never after it accepted one.
type Random[T comparable] struct {
	mu      sync.Mutex
	targets []T
	weights []int
	index   map[T]int // target -> position in targets
	table   atomic.Pointer[randomTable[T]]
}

var _ Balancer[string] = (*Random[string])(nil)

// randomTable is an immutable snapshot of the targets and their alias
// table: draw i uniformly, keep it if a uniform draw below total is below
// prob[i], else take alias[i].
type randomTable[T comparable] struct {
	targets []T
	prob    []uint64 // nil when all weights are equal
	alias   []int
	total   uint64 // sum of weights
}

// randomDraws is how many random targets Pick offers to skip before it
// walks the whole set.
const randomDraws = 3

// NewRandom returns an empty random balancer. It takes nothing, so it
// cannot fail.
func NewRandom[T comparable]() *Random[T] { return new(Random[T]) }

// Add puts t in the set with the given weight (below 1 counts as 1), or
// sets the weight of a t already there; it reports whether t is new.
func (r *Random[T]) Add(t T, weight int) bool {
	weight = clampWeight(weight)
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.index[t]
	if ok {
		if r.weights[i] != weight {
			r.weights[i] = weight
			r.publish()
		}
		return false
	}
	if r.index == nil {
		r.index = make(map[T]int)
	}
	r.index[t] = len(r.targets)
	r.targets = append(r.targets, t)
	r.weights = append(r.weights, weight)
	r.publish()
	return true
}

// Remove takes t out of the set and reports whether it was there.
func (r *Random[T]) Remove(t T) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.index[t]
	if !ok {
		return false
	}
	delete(r.index, t)
	last := len(r.targets) - 1
	if i != last {
		r.targets[i], r.weights[i] = r.targets[last], r.weights[last]
		r.index[r.targets[i]] = i
	}
	var zero T
	r.targets[last] = zero
	r.targets, r.weights = r.targets[:last], r.weights[:last]
	r.publish()
	return true
}

// Len reports the number of targets.
func (r *Random[T]) Len() int {
	if t := r.table.Load(); t != nil {
		return len(t.targets)
	}
	return 0
}

// publish builds a new table from targets and weights (Vose's alias
// method, in integers). The caller holds mu.
func (r *Random[T]) publish() {
	n := len(r.targets)
	t := &randomTable[T]{targets: append([]T(nil), r.targets...)}
	uniform := true
	for _, w := range r.weights {
		t.total += uint64(w)
		uniform = uniform && w == r.weights[0]
	}
	if uniform {
		r.table.Store(t)
		return
	}
	// Scale every weight by n: a column holds total, and column i starts
	// with weights[i]*n of its own, topped up from a heavier target.
	t.prob = make([]uint64, n)
	t.alias = make([]int, n)
	scaled := make([]uint64, n)
	var small, large []int
	for i, w := range r.weights {
		scaled[i] = uint64(w) * uint64(n)
		if scaled[i] < t.total {
			small = append(small, i)
		} else {
			large = append(large, i)
		}
	}
	for len(small) > 0 && len(large) > 0 {
		s := small[len(small)-1]
		small = small[:len(small)-1]
		l := large[len(large)-1]
		t.prob[s], t.alias[s] = scaled[s], l
		scaled[l] -= t.total - scaled[s]
		if scaled[l] < t.total {
			large = large[:len(large)-1]
			small = append(small, l)
		}
	}
	for _, i := range large {
		t.prob[i], t.alias[i] = t.total, i
	}
	for _, i := range small { // only by rounding; cannot happen in integers
		t.prob[i], t.alias[i] = t.total, i
	}
	r.table.Store(t)
}

// Pick returns a random target; key is ignored.
func (r *Random[T]) Pick(_ string, skip func(T) bool) (T, bool) {
	var zero T
	t := r.table.Load()
	if t == nil || len(t.targets) == 0 {
		return zero, false
	}
	for range randomDraws {
		c := t.targets[t.draw()]
		if skip == nil || !skip(c) {
			return c, true
		}
	}
	n := len(t.targets)
	start := rand.IntN(n)
	for k := range n {
		c := t.targets[(start+k)%n]
		if !skip(c) {
			return c, true
		}
	}
	return zero, false
}

func (t *randomTable[T]) draw() int {
	i := rand.IntN(len(t.targets))
	if t.prob != nil && rand.Uint64N(t.total) >= t.prob[i] {
		i = t.alias[i]
	}
	return i
}

// Done does nothing: random picks do not count calls in flight.
func (r *Random[T]) Done(T) {}
