package lb

import (
	"cmp"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
)

// ConsistentHash routes by key: the same key goes to the same target while
// the set of targets is unchanged, so a target can keep state per key
// (sticky routing). It is a hash ring of virtual nodes: each target owns
// replicas×weight points on a 64-bit circle, placed by hashing its name,
// and a key goes to the owner of the first point at or after the key's
// hash. Adding a target moves only the keys that now land on its points;
// removing one moves only its own keys, each to the owner of the next
// point, so keys spread over the rest rather than onto one neighbour.
//
// Hashes are FNV-1a, finished with a 64-bit mixer, and depend only on
// names, replicas and weights: every process with the same set routes a
// key the same way, whatever the order in which targets were added.
//
// A target that skip rejects hands the key on to the owner of the next
// point; after a few points, Pick walks every target from a position
// fixed by the key. skip may be offered a target more than once in one
// Pick, but never after it accepted one.
//
// Pick finds the point through an index of the circle's top bits, O(1)
// expected, lock-free and without allocation. Add and Remove only record
// the change; the next Pick rebuilds the circle once for all changes made
// since, in O(p + a·log a) for p points and a added ones.
type ConsistentHash[T comparable] struct {
	name     func(T) string
	replicas int

	mu      sync.Mutex
	members map[T]*hashMember[T] // guarded by mu
	added   []*hashMember[T]     // guarded by mu; since the last rebuild
	removed bool                 // guarded by mu; since the last rebuild
	stale   atomic.Bool          // a change waits for the next rebuild
	circle  atomic.Pointer[hashCircle[T]]
}

var _ Balancer[string] = (*ConsistentHash[string])(nil)

type hashMember[T comparable] struct {
	target T
	name   string
	weight int
	gone   bool // removed; guarded by the balancer's mu
}

type hashPoint[T comparable] struct {
	hash  uint64
	owner *hashMember[T]
}

// hashCircle is an immutable snapshot: points sorted by hash, and for each
// value of the top bits of a hash, the first point with those top bits or
// more.
type hashCircle[T comparable] struct {
	points  []hashPoint[T]
	members []*hashMember[T]
	first   []uint32
	shift   uint // 64 - log2(len(first))
}

const (
	// DefaultReplicas is the number of points per unit of weight that
	// [NewConsistentHash] gives a target when asked for 0.
	DefaultReplicas = 100
	// maxReplicas bounds the points per unit of weight: with a weight of
	// 100, a target then owns a million points (16 MB).
	maxReplicas = 10_000
	// maxHashWeight caps the weight of a target on the hash ring, which
	// multiplies its points.
	maxHashWeight = 100
	// hashWalk is how many points Pick walks past rejected owners before
	// it walks the targets instead.
	hashWalk = 32
)

// NewConsistentHash returns an empty consistent-hash balancer. name gives a
// target's stable identity (a node id, an address), from which its points
// are placed; targets must have distinct names. replicas is the number of
// points per unit of weight, from 1 to 10,000, or 0 for
// [DefaultReplicas]: more points spread keys more evenly and cost memory,
// 16 bytes each. Weights above 100 count as 100. It fails when name is
// nil or replicas is out of range.
func NewConsistentHash[T comparable](name func(T) string, replicas int) (*ConsistentHash[T], error) {
	switch {
	case name == nil:
		return nil, errors.New("wizard: lb: NewConsistentHash: nil name function")
	case replicas < 0 || replicas > maxReplicas:
		return nil, fmt.Errorf("wizard: lb: NewConsistentHash: %d replicas; want 0 for the default (%d) or 1 to %d", replicas, DefaultReplicas, maxReplicas)
	case replicas == 0:
		replicas = DefaultReplicas
	}
	return &ConsistentHash[T]{name: name, replicas: replicas}, nil
}

// Add puts t in the set with the given weight (below 1 counts as 1, above
// 100 as 100), or sets the weight of a t already there; it reports
// whether t is new.
func (c *ConsistentHash[T]) Add(t T, weight int) bool {
	weight = min(max(weight, 1), maxHashWeight)
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok := c.members[t]
	if ok && old.weight == weight {
		return false
	}
	if ok {
		old.gone = true
		c.removed = true
	}
	if c.members == nil {
		c.members = make(map[T]*hashMember[T])
	}
	m := &hashMember[T]{target: t, name: c.name(t), weight: weight}
	c.members[t] = m
	c.added = append(c.added, m)
	c.stale.Store(true)
	return !ok
}

// Remove takes t out of the set and reports whether it was there.
func (c *ConsistentHash[T]) Remove(t T) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.members[t]
	if !ok {
		return false
	}
	delete(c.members, t)
	m.gone = true
	c.removed = true
	c.stale.Store(true)
	return true
}

// Len reports the number of targets.
func (c *ConsistentHash[T]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.members)
}

// Pick returns the target that owns key.
func (c *ConsistentHash[T]) Pick(key string, skip func(T) bool) (T, bool) {
	var zero T
	var circ *hashCircle[T]
	if c.stale.Load() {
		circ = c.rebuild()
	} else {
		circ = c.circle.Load()
	}
	if circ == nil || len(circ.points) == 0 {
		return zero, false
	}
	h := keyHash(key)
	n := len(circ.points)
	i := int(circ.first[h>>circ.shift])
	for i < n && circ.points[i].hash < h {
		i++
	}
	if i == n {
		i = 0
	}
	if skip == nil {
		return circ.points[i].owner.target, true
	}
	var last *hashMember[T]
	for range min(hashWalk, n) {
		m := circ.points[i].owner
		if m != last {
			if !skip(m.target) {
				return m.target, true
			}
			last = m
		}
		if i++; i == n {
			i = 0
		}
	}
	ms := circ.members
	start := int(h % uint64(len(ms)))
	for k := range ms {
		if t := ms[(start+k)%len(ms)].target; !skip(t) {
			return t, true
		}
	}
	return zero, false
}

// rebuild makes the circle for the current members: the points of the old
// circle that are still owned, merged with those of members added since.
func (c *ConsistentHash[T]) rebuild() *hashCircle[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.circle.Load()
	if !c.stale.Load() {
		return old
	}
	var kept []hashPoint[T]
	if old != nil {
		kept = old.points
		if c.removed {
			kept = slices.DeleteFunc(slices.Clone(kept), func(p hashPoint[T]) bool { return p.owner.gone })
		}
	}
	var fresh []hashPoint[T]
	for _, m := range c.added {
		if m.gone {
			continue
		}
		base := stringHash(m.name)
		for r := range c.replicas * m.weight {
			fresh = append(fresh, hashPoint[T]{hash: mix64(base + uint64(r+1)*0x9e3779b97f4a7c15), owner: m})
		}
	}
	slices.SortFunc(fresh, comparePoints[T])
	points := make([]hashPoint[T], 0, len(kept)+len(fresh))
	for len(kept) > 0 && len(fresh) > 0 {
		if comparePoints(kept[0], fresh[0]) <= 0 {
			points, kept = append(points, kept[0]), kept[1:]
		} else {
			points, fresh = append(points, fresh[0]), fresh[1:]
		}
	}
	points = append(append(points, kept...), fresh...)

	circ := &hashCircle[T]{points: points, members: make([]*hashMember[T], 0, len(c.members))}
	for _, m := range c.members {
		circ.members = append(circ.members, m)
	}
	// A fixed order keeps the fallback walk the same in every process.
	slices.SortFunc(circ.members, func(a, b *hashMember[T]) int { return cmp.Compare(a.name, b.name) })
	// About one point per index slot: the scan after the lookup is short.
	bitsN := max(bits.Len(uint(len(points))), 1)
	circ.shift = uint(64 - bitsN)
	circ.first = make([]uint32, 1<<bitsN)
	p := 0
	for slot := range circ.first {
		for p < len(points) && points[p].hash>>circ.shift < uint64(slot) {
			p++
		}
		circ.first[slot] = uint32(p)
	}
	c.added = nil
	c.removed = false
	c.circle.Store(circ)
	c.stale.Store(false)
	return circ
}

// comparePoints orders points by hash, and equal hashes by owner name so
// the order does not depend on the order of insertion.
func comparePoints[T comparable](a, b hashPoint[T]) int {
	if c := cmp.Compare(a.hash, b.hash); c != 0 {
		return c
	}
	return cmp.Compare(a.owner.name, b.owner.name)
}

// Done does nothing: consistent hashing does not count calls in flight.
func (c *ConsistentHash[T]) Done(T) {}

// keyHash places a key on the circle.
func keyHash(key string) uint64 { return mix64(stringHash(key)) }

// stringHash is 64-bit FNV-1a.
func stringHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// mix64 is the finaliser of MurmurHash3: it spreads FNV's weak low bits
// over the whole word.
func mix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9f53fe5d8cf
	h ^= h >> 33
	return h
}
