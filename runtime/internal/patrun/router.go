package patrun

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

// Router maps patterns to values and finds the best pattern for a message
// with Seneca's precedence (see package runtime's documentation,
// # Precedence). It is the matcher inside a runtime Node, exported (as
// runtime/pattern's Router) so it can be used and tested on its own. A
// Router is safe for concurrent use.
//
// The zero Router is not ready for use; call [NewRouter].
type Router[V any] struct {
	mu   sync.RWMutex
	root rnode[V]
	// all holds every pattern by canonical string; its glob-free ones are
	// the one-lookup fast path of findPattern and find.
	all  map[string]*rentry[V]
	keys map[string]int // how many patterns use each key
	seq  uint64
}

type rentry[V any] struct {
	pattern Pattern
	value   V
	seq     uint64 // add order
}

// rnode is one position in the decision tree. Its entry is the value of the
// pattern that ends here. key, its children by exact value and its globs
// form the first level of the key chain at this position (the smallest key
// still to test); skip leads to the rest of the chain, for messages that do
// not match at this level.
//
// A level of one exact value and no glob, which most levels are (every
// pair of a pattern that no other pattern shares past its path), holds
// its child inline (one, only): a map would cost four times the node.
// From a second value on, or with a glob, the children are in more.
type rnode[V any] struct {
	entry *rentry[V]
	key   string
	one   string    // the value of only
	only  *rnode[V] // the child of the level's one exact value, or nil
	more  *rmore[V] // the level's exact values (when more than one) and globs
	skip  *rnode[V]
}

// rmore is a level of more than one exact value, or with globs. Its
// values hold every exact child then (the node's only is nil); it is
// dropped when the level is back to one exact value and no glob.
type rmore[V any] struct {
	vals  map[string]*rnode[V]
	globs []rglob[V] // in the order added
}

type rglob[V any] struct {
	glob string
	node *rnode[V]
	seq  uint64 // smallest add order under node; globs stay sorted by it
}

// NewRouter returns an empty router.
func NewRouter[V any]() *Router[V] {
	return &Router[V]{
		all:  make(map[string]*rentry[V]),
		keys: make(map[string]int),
	}
}

// Add adds p with its value. Adding a pattern identical to one already in
// the router is an error. Values are never replaced in place: to change
// what a pattern maps to, store something mutable (as Node does) or Remove
// and Add.
func (r *Router[V]) Add(p Pattern, v V) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := p.String()
	if _, ok := r.all[key]; ok {
		return fmt.Errorf("wizard: pattern %q is already added", key)
	}
	r.seq++
	e := &rentry[V]{pattern: p, value: v, seq: r.seq}
	n := &r.root
	pairs := p.pairs()
	for i := 0; i < len(pairs); {
		pr := pairs[i]
		switch {
		case n.key == pr.Key:
			n = n.child(pr.Value, e.seq)
			i++
		case n.key == "":
			n.key = pr.Key
			n = n.child(pr.Value, e.seq)
			i++
		case pr.Key < n.key:
			// The new key sorts first: push this level down the skip chain.
			n.skip = &rnode[V]{key: n.key, one: n.one, only: n.only, more: n.more, skip: n.skip}
			n.key, n.one, n.only, n.more = pr.Key, "", nil, nil
			n = n.child(pr.Value, e.seq)
			i++
		default:
			if n.skip == nil {
				n.skip = &rnode[V]{}
			}
			n = n.skip
		}
	}
	n.entry = e
	r.all[key] = e
	for _, pr := range pairs {
		r.keys[pr.Key]++
	}
	return nil
}

// child returns the node under value v of n's level, creating it for the
// entry with add order seq.
func (n *rnode[V]) child(v string, seq uint64) *rnode[V] {
	if IsGlob(v) {
		for _, g := range n.globs() {
			if g.glob == v {
				return g.node
			}
		}
		c := &rnode[V]{}
		m := n.wide()
		m.globs = append(m.globs, rglob[V]{v, c, seq})
		return c
	}
	if c := n.val(v); c != nil {
		return c
	}
	c := &rnode[V]{}
	switch {
	case n.only == nil && n.more == nil:
		n.one, n.only = v, c
	default:
		m := n.wide()
		if m.vals == nil {
			m.vals = make(map[string]*rnode[V])
		}
		m.vals[v] = c
	}
	return c
}

// val returns the child of n's level under the exact value v, or nil.
func (n *rnode[V]) val(v string) *rnode[V] {
	if n.only != nil {
		if n.one == v {
			return n.only
		}
		return nil
	}
	if n.more != nil {
		return n.more.vals[v]
	}
	return nil
}

// globs returns the globs of n's level, in the order added.
func (n *rnode[V]) globs() []rglob[V] {
	if n.more == nil {
		return nil
	}
	return n.more.globs
}

// wide returns n's more, made on first use, with the inline child moved
// into its values.
func (n *rnode[V]) wide() *rmore[V] {
	if n.more == nil {
		n.more = &rmore[V]{}
	}
	if n.only != nil {
		n.more.vals = map[string]*rnode[V]{n.one: n.only}
		n.one, n.only = "", nil
	}
	return n.more
}

// narrow puts n's level back inline when it has one exact value and no
// glob left, and drops more when it holds nothing.
func (n *rnode[V]) narrow() {
	m := n.more
	if m == nil || len(m.globs) > 0 || len(m.vals) > 1 {
		return
	}
	for v, c := range m.vals {
		n.one, n.only = v, c
	}
	n.more = nil
}

// levelEmpty reports whether n's level has no child left.
func (n *rnode[V]) levelEmpty() bool { return n.only == nil && n.more == nil }

// Remove removes p and reports whether it was present. Other patterns,
// wider or narrower, are untouched: the router answers afterwards exactly as
// one built from the remaining patterns would.
func (r *Router[V]) Remove(p Pattern) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := p.String()
	e, ok := r.all[key]
	if !ok {
		return false
	}
	r.root.remove(p.pairs(), e.seq)
	for _, pr := range p.pairs() {
		if r.keys[pr.Key]--; r.keys[pr.Key] == 0 {
			delete(r.keys, pr.Key)
		}
	}
	delete(r.all, key)
	return true
}

// remove clears the entry at the end of pairs' path and prunes the nodes and
// levels left empty, so the tree keeps the shape a fresh build would have.
// seq is the add order of the entry removed.
func (n *rnode[V]) remove(pairs []Pair, seq uint64) {
	if len(pairs) == 0 {
		n.entry = nil
		return
	}
	pr := pairs[0]
	switch {
	case n.key == pr.Key:
		if IsGlob(pr.Value) {
			globs := n.more.globs
			i := slices.IndexFunc(globs, func(g rglob[V]) bool { return g.glob == pr.Value })
			c := globs[i].node
			c.remove(pairs[1:], seq)
			if c.empty() {
				n.more.globs = slices.Delete(globs, i, i+1)
			} else if globs[i].seq == seq {
				// A fresh build orders globs by the first-added pattern
				// under each: move this one back if that pattern is gone.
				globs[i].seq = c.minSeq()
				for ; i+1 < len(globs) && globs[i+1].seq < globs[i].seq; i++ {
					globs[i], globs[i+1] = globs[i+1], globs[i]
				}
			}
		} else {
			c := n.val(pr.Value)
			c.remove(pairs[1:], seq)
			if c.empty() {
				if n.only == c {
					n.one, n.only = "", nil
				} else {
					delete(n.more.vals, pr.Value)
				}
			}
		}
		n.narrow()
		if n.levelEmpty() {
			// The level is gone: the rest of the chain moves up.
			if s := n.skip; s != nil {
				n.key, n.one, n.only, n.more, n.skip = s.key, s.one, s.only, s.more, s.skip
			} else {
				n.key = ""
			}
		}
	case n.key != "" && pr.Key > n.key:
		n.skip.remove(pairs, seq)
		if n.skip.key == "" {
			n.skip = nil
		}
	}
}

// minSeq returns the smallest add order of the entries under n.
func (n *rnode[V]) minSeq() uint64 {
	m := uint64(math.MaxUint64)
	if n.entry != nil {
		m = n.entry.seq
	}
	if n.only != nil {
		m = min(m, n.only.minSeq())
	}
	if n.more != nil {
		for _, c := range n.more.vals {
			m = min(m, c.minSeq())
		}
		for _, g := range n.more.globs {
			m = min(m, g.seq)
		}
	}
	if n.skip != nil {
		m = min(m, n.skip.minSeq())
	}
	return m
}

func (n *rnode[V]) empty() bool { return n.entry == nil && n.key == "" }

// Find returns the value of the pattern that best matches msg, the pattern
// itself, and whether one matched. Only msg's root-level scalar values route
// (strings, numbers, booleans); keys ending in '$' and nil values are ignored.
func (r *Router[V]) Find(msg map[string]any) (V, Pattern, bool) {
	var buf [16]Pair
	return r.result(r.find(MapPairs(buf[:0], msg), false))
}

// FindExact is like [Router.Find] but returns a pattern only when the walk
// that found it tested every routed key of msg (by value or glob). Unlike
// patrun's findexact, keys matched on an abandoned branch of the walk do not
// count.
func (r *Router[V]) FindExact(msg map[string]any) (V, Pattern, bool) {
	var buf [16]Pair
	return r.result(r.find(MapPairs(buf[:0], msg), true))
}

func (r *Router[V]) result(e *rentry[V]) (V, Pattern, bool) {
	if e == nil {
		var zero V
		return zero, Pattern{}, false
	}
	return e.value, e.pattern, true
}

// List returns every pattern in the router, sorted by canonical string.
func (r *Router[V]) List() []Pattern {
	r.mu.RLock()
	out := make([]Pattern, 0, len(r.all))
	for _, e := range r.all {
		out = append(out, e.pattern)
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b Pattern) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// RoutesBy reports whether a pattern in the router has the key k. A
// message's pairs under other keys never change what [Router.Find]
// returns.
func (r *Router[V]) RoutesBy(k string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.keys[k] > 0
}

// Len returns the number of patterns.
func (r *Router[V]) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.all)
}

// exactEntry returns the entry added for exactly p, or nil.
func (r *Router[V]) exactEntry(p Pattern) *rentry[V] {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.all[p.String()]
}

// findPattern finds the best match for a message whose routed pairs are
// exactly p's. Used with pre-parsed patterns, it is one hash lookup when p
// itself is in the router.
func (r *Router[V]) findPattern(p Pattern) *rentry[V] {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if e := r.all[p.String()]; e != nil && !e.pattern.HasGlob() {
		return e
	}
	return r.walk(p.pairs(), false)
}

// find finds the best match for sorted routed pairs.
func (r *Router[V]) find(pairs []Pair, exact bool) *rentry[V] {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !exact {
		// A message whose routed pairs are exactly a glob-free pattern finds
		// that pattern (its own path through the tree always wins), so one
		// hash lookup settles it. Message keys are not checked like pattern
		// keys ({"a:1,b": 2} prints as a:1,b:2), so compare the pairs too.
		var buf [256]byte
		if e := r.all[string(AppendCanonical(buf[:0], pairs))]; e != nil && !e.pattern.HasGlob() && slices.Equal(e.pattern.pairs(), pairs) {
			return e
		}
	}
	return r.walk(pairs, exact)
}

type star[V any] struct {
	node  *rnode[V]
	found int
}

// walk is patrun's find: descend greedily, exact value before globs (in the
// order added) before the skip branch; remember skip branches passed; a node
// without an entry keeps the last entry seen; go back to a remembered skip
// branch only while nothing has been found (a catch-all counts as found).
// Callers hold r.mu.
func (r *Router[V]) walk(pairs []Pair, exact bool) *rentry[V] {
	var buf [16]star[V]
	stars := buf[:0]
	n := &r.root
	data := r.root.entry
	found := 0
	for n != nil {
		var next *rnode[V]
		if n.key != "" {
			if val, ok := LookupPair(pairs, n.key); ok {
				next = n.val(val)
				if next == nil {
					for _, g := range n.globs() {
						if GlobMatch(g.glob, val) {
							next = g.node
							break
						}
					}
				}
			}
			if next != nil {
				if n.skip != nil {
					stars = append(stars, star[V]{n.skip, found})
				}
				found++
				if next.entry != nil {
					data = next.entry
				} else if exact {
					data = nil
				}
				n = next
			} else {
				n = n.skip
			}
		} else {
			n = nil
		}
		if n == nil && data == nil && len(stars) > 0 {
			top := stars[len(stars)-1]
			stars = stars[:len(stars)-1]
			n, found = top.node, top.found
		}
	}
	if exact {
		if found != len(pairs) {
			return nil
		}
		return data
	}
	if data == nil {
		data = r.root.entry
	}
	return data
}

// LookupPair finds key in pairs sorted by key.
func LookupPair(pairs []Pair, key string) (string, bool) {
	if len(pairs) <= 8 {
		for _, p := range pairs {
			if p.Key == key {
				return p.Value, true
			}
		}
		return "", false
	}
	i, ok := slices.BinarySearchFunc(pairs, key, func(p Pair, k string) int { return strings.Compare(p.Key, k) })
	if !ok {
		return "", false
	}
	return pairs[i].Value, true
}

// MapPairs appends msg's routed pairs to dst, sorted by key.
func MapPairs(dst []Pair, msg map[string]any) []Pair {
	for k, v := range msg {
		if IsMetaKey(k) {
			continue
		}
		if s, ok := RouteValue(v); ok {
			dst = append(dst, Pair{k, s})
		}
	}
	SortPairs(dst)
	return dst
}

// SortPairs sorts pairs by key without allocating.
func SortPairs(ps []Pair) {
	if len(ps) > 12 {
		slices.SortFunc(ps, func(a, b Pair) int { return strings.Compare(a.Key, b.Key) })
		return
	}
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].Key < ps[j-1].Key; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}
