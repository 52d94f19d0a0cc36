package ring

import (
	"iter"
	"sync"
)

// Ring is a weighted round-robin ring of targets. The zero value is an
// empty ring ready to use. A Ring is safe for concurrent use; it must not
// be copied after first use.
type Ring[T comparable] struct {
	mu    sync.Mutex
	nodes []node[T] // in no particular order; links give the ring order
	index map[T]int // target -> position in nodes
	cur   int       // position of the cursor's node; meaningless when empty
	left  int       // picks left for the cursor's node in its current turn
}

type node[T comparable] struct {
	target     T
	next, prev int
	weight     int
}

// Len reports the number of targets.
func (r *Ring[T]) Len() int {
	r.mu.Lock()
	n := len(r.nodes)
	r.mu.Unlock()
	return n
}

// Add inserts t with the given weight just before the cursor, so it gets
// its first turn after every target already in the ring has had its turn
// in the current round. A weight below 1 counts as 1. If t is already in
// the ring, Add sets its weight as [Ring.SetWeight] does and reports false.
func (r *Ring[T]) Add(t T, weight int) bool {
	weight = max(weight, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if i, ok := r.index[t]; ok {
		r.setWeight(i, weight)
		return false
	}
	if r.index == nil {
		r.index = make(map[T]int)
	}
	i := len(r.nodes)
	if i == 0 {
		r.nodes = append(r.nodes, node[T]{target: t, next: 0, prev: 0, weight: weight})
		r.cur, r.left = 0, weight
	} else {
		prev := r.nodes[r.cur].prev
		r.nodes = append(r.nodes, node[T]{target: t, next: r.cur, prev: prev, weight: weight})
		r.nodes[prev].next = i
		r.nodes[r.cur].prev = i
	}
	r.index[t] = i
	return true
}

// Remove takes t out of the ring and reports whether it was there. If t is
// under the cursor, the cursor moves to the next target, which starts a
// full turn.
func (r *Ring[T]) Remove(t T) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.index[t]
	if !ok {
		return false
	}
	delete(r.index, t)
	last := len(r.nodes) - 1
	if last == 0 {
		clear(r.nodes)
		r.nodes = r.nodes[:0]
		r.cur, r.left = 0, 0
		return true
	}
	n := r.nodes[i]
	r.nodes[n.prev].next = n.next
	r.nodes[n.next].prev = n.prev
	if r.cur == i {
		r.cur, r.left = n.next, r.nodes[n.next].weight
	}
	if i != last {
		// Move the last node into the hole and repoint its neighbours.
		// A node left alone links to itself.
		m := r.nodes[last]
		if m.next == last {
			m.next, m.prev = i, i
		}
		r.nodes[i] = m
		r.nodes[m.prev].next = i
		r.nodes[m.next].prev = i
		r.index[m.target] = i
		if r.cur == last {
			r.cur = i
		}
	}
	r.nodes[last] = node[T]{}
	r.nodes = r.nodes[:last]
	if c := cap(r.nodes); c > 64 && last < c/4 {
		r.nodes = append(make([]node[T], 0, c/2), r.nodes...)
	}
	return true
}

// SetWeight sets t's weight (a weight below 1 counts as 1) and reports
// whether t is in the ring. If t is under the cursor with more picks left
// in its turn than the new weight, its turn is shortened to the new
// weight.
func (r *Ring[T]) SetWeight(t T, weight int) bool {
	weight = max(weight, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.index[t]
	if ok {
		r.setWeight(i, weight)
	}
	return ok
}

func (r *Ring[T]) setWeight(i, weight int) {
	r.nodes[i].weight = weight
	if i == r.cur {
		r.left = min(r.left, weight)
	}
}

// Weight reports t's weight and whether t is in the ring.
func (r *Ring[T]) Weight(t T) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.index[t]
	if !ok {
		return 0, false
	}
	return r.nodes[i].weight, true
}

// Pick returns the next target in weighted round-robin order.
//
// skip, if not nil, reports targets that must not be picked now; a skipped
// target loses the rest of its turn. Pick calls skip at most once per
// target, and the target for which skip reports false is the one returned
// (so skip may take a resource for it, such as a circuit breaker's
// permit). Pick reports false when the ring is empty or skip rejects every
// target. skip runs with the ring locked: it must not call the ring.
func (r *Ring[T]) Pick(skip func(T) bool) (T, bool) {
	r.mu.Lock()
	if len(r.nodes) == 0 {
		r.mu.Unlock()
		var zero T
		return zero, false
	}
	if skip == nil {
		if r.left == 0 {
			r.cur = r.nodes[r.cur].next
			r.left = r.nodes[r.cur].weight
		}
		r.left--
		t := r.nodes[r.cur].target
		r.mu.Unlock()
		return t, true
	}
	t, ok := r.pickSkip(skip)
	r.mu.Unlock()
	return t, ok
}

func (r *Ring[T]) pickSkip(skip func(T) bool) (T, bool) {
	for range len(r.nodes) {
		if r.left == 0 {
			r.cur = r.nodes[r.cur].next
			r.left = r.nodes[r.cur].weight
		}
		t := r.nodes[r.cur].target
		if skip(t) {
			r.left = 0
			continue
		}
		r.left--
		return t, true
	}
	var zero T
	return zero, false
}

// All yields each target and its weight in ring order, starting at the
// cursor. It iterates over a copy taken when the loop starts, so the loop
// body may call the ring.
func (r *Ring[T]) All() iter.Seq2[T, int] {
	return func(yield func(T, int) bool) {
		r.mu.Lock()
		snap := make([]node[T], 0, len(r.nodes))
		if len(r.nodes) > 0 {
			i := r.cur
			for range len(r.nodes) {
				snap = append(snap, r.nodes[i])
				i = r.nodes[i].next
			}
		}
		r.mu.Unlock()
		for _, n := range snap {
			if !yield(n.target, n.weight) {
				return
			}
		}
	}
}
