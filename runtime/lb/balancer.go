package lb

// Balancer chooses a target for each call among a changing set of
// targets. Implementations are safe for concurrent use.
type Balancer[T comparable] interface {
	// Add puts t in the set with the given weight (below 1 counts as 1),
	// or sets the weight of a t already there; it reports whether t is
	// new.
	Add(t T, weight int) bool
	// Remove takes t out of the set and reports whether it was there.
	Remove(t T) bool
	// Len reports the number of targets.
	Len() int
	// Pick chooses a target for a call. key matters only to balancers
	// that route by key ([ConsistentHash]); others ignore it. skip, if
	// not nil, rejects targets: Pick never calls it again once it reports
	// false, and returns the target it accepted (see the package doc).
	// Pick reports false when there is no target or skip rejects all.
	Pick(key string, skip func(T) bool) (T, bool)
	// Done reports that a call to t, picked before, is over. Only
	// balancers that count calls in flight ([LeastInFlight]) use it.
	Done(t T)
}

// A weight below minWeight counts as minWeight; balancers that multiply
// weights clamp them to maxWeight so the arithmetic cannot overflow.
const (
	minWeight = 1
	maxWeight = 1<<31 - 1
)

func clampWeight(w int) int { return min(max(w, minWeight), maxWeight) }
