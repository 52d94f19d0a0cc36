package lb

import (
	"iter"

	"github.com/wizardmesh/wizard/runtime/internal/ring"
)

// Ring is the MicroWizard ring (MicroWizard's default balancer): round robin
// over a linked ring of targets, each target's weight an execution
// counter. The target under the cursor is picked weight times in a row,
// then the cursor moves on; targets with weights 2 and 1 are picked A, A,
// B, A, A, B. A target that skip rejects loses the rest of its turn.
//
// A new target goes just before the cursor, so it gets its first turn
// after every target already there has had its own. Removing the target
// under the cursor moves the cursor to the next target, which starts a
// full turn.
//
// Pick, Remove and SetWeight are O(1), Add amortised O(1); there is no cap
// on the number of targets. Pick allocates nothing. The zero value is an
// empty ring ready to use.
type Ring[T comparable] struct {
	r ring.Ring[T]
}

var _ Balancer[string] = (*Ring[string])(nil)

// NewRing returns an empty ring. It takes nothing, so it cannot fail.
func NewRing[T comparable]() *Ring[T] { return new(Ring[T]) }

// Add puts t in the ring with the given weight (below 1 counts as 1), or
// sets the weight of a t already there; it reports whether t is new.
func (r *Ring[T]) Add(t T, weight int) bool { return r.r.Add(t, weight) }

// Remove takes t out of the ring and reports whether it was there.
func (r *Ring[T]) Remove(t T) bool { return r.r.Remove(t) }

// SetWeight sets t's weight (below 1 counts as 1) and reports whether t is
// in the ring. A turn under way is shortened if it has more picks left
// than the new weight.
func (r *Ring[T]) SetWeight(t T, weight int) bool { return r.r.SetWeight(t, weight) }

// Len reports the number of targets.
func (r *Ring[T]) Len() int { return r.r.Len() }

// All yields each target and its weight in ring order, starting at the
// cursor, from a copy taken when the loop starts.
func (r *Ring[T]) All() iter.Seq2[T, int] { return r.r.All() }

// Pick returns the next target in weighted round-robin order; key is
// ignored. skip runs with the ring locked and must not call the ring; it
// is offered each target at most once per Pick.
func (r *Ring[T]) Pick(_ string, skip func(T) bool) (T, bool) { return r.r.Pick(skip) }

// Done does nothing: the ring does not count calls in flight.
func (r *Ring[T]) Done(T) {}
