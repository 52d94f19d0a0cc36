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
// pattern that ends here. The level at this position (the first of the key
// chain, its key the smallest still to test) has a key, children by exact
// value and globs; the skip chain leads to the rest of the key chain, for
// messages that do not match at this level.
//
// A node is four words: most nodes end a pattern, or lead to one child
// under one value (every pair of a pattern that no other pattern shares
// past its path). A level of one exact value holds its child inline (only,
// its key and value at), and its pair is one of a pattern added through
// it; more holds what a level has beyond that: other values (a map would
// cost four times the node), globs, the skip chain.
type rnode[V any] struct {
	entry *rentry[V]
	at    *Pair     // the level's key; while only is set, only's value too; nil for no level
	only  *rnode[V] // the child of the level's one exact value, or nil
	more  *rmore[V] // nil while the level has no more than only
}

// rmore is what a level holds beyond one exact value: its exact values
// when more than one (only is nil then), its globs and the skip chain.
type rmore[V any] struct {
	vals  map[string]*rnode[V]
	globs []rglob[V] // in the order added
	skip  *rnode[V]
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
		pr := &pairs[i] // p is immutable: a level may keep its pair
		switch k := n.key(); {
		case k == pr.Key:
			n = n.child(pr, e.seq)
			i++
		case k == "":
			n.at = pr
			n = n.child(pr, e.seq)
			i++
		case pr.Key < k:
			// The new key sorts first: push this level down the skip chain.
			down := &rnode[V]{at: n.at, only: n.only, more: n.more}
			n.at, n.only, n.more = pr, nil, &rmore[V]{skip: down}
			n = n.child(pr, e.seq)
			i++
		default:
			s := n.skip()
			if s == nil {
				s = &rnode[V]{}
				n.extra().skip = s
			}
			n = s
		}
	}
	n.entry = e
	r.all[key] = e
	for _, pr := range pairs {
		r.keys[pr.Key]++
	}
	return nil
}

// child returns the node under pr's value of n's level (whose key is
// pr's), creating it for the entry with add order seq.
func (n *rnode[V]) child(pr *Pair, seq uint64) *rnode[V] {
	v := pr.Value
	if IsGlob(v) {
		for _, g := range n.globs() {
			if g.glob == v {
				return g.node
			}
		}
		c := &rnode[V]{}
		m := n.extra()
		m.globs = append(m.globs, rglob[V]{v, c, seq})
		return c
	}
	if c := n.val(v); c != nil {
		return c
	}
	c := &rnode[V]{}
	if n.only == nil && (n.more == nil || len(n.more.vals) == 0) {
		n.at, n.only = pr, c
		return c
	}
	m := n.extra()
	if n.only != nil {
		m.vals = map[string]*rnode[V]{n.at.Value: n.only}
		n.only = nil
	}
	m.vals[v] = c
	return c
}

// key returns the key of n's level, "" when it has none.
func (n *rnode[V]) key() string {
	if n.at == nil {
		return ""
	}
	return n.at.Key
}

// val returns the child of n's level under the exact value v, or nil.
func (n *rnode[V]) val(v string) *rnode[V] {
	if n.only != nil {
		if n.at.Value == v {
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

// skip returns the rest of n's key chain, or nil.
func (n *rnode[V]) skip() *rnode[V] {
	if n.more == nil {
		return nil
	}
	return n.more.skip
}

// extra returns n's more, made on first use.
func (n *rnode[V]) extra() *rmore[V] {
	if n.more == nil {
		n.more = &rmore[V]{}
	}
	return n.more
}

// narrow puts n's level's exact child back inline when it has one left,
// and drops more when it holds nothing.
func (n *rnode[V]) narrow() {
	m := n.more
	if m == nil {
		return
	}
	if len(m.vals) <= 1 {
		for v, c := range m.vals {
			n.at, n.only = &Pair{n.at.Key, v}, c
		}
		m.vals = nil
	}
	if len(m.globs) == 0 && m.skip == nil && m.vals == nil {
		n.more = nil
	}
}

// levelEmpty reports whether n's level has no child left.
func (n *rnode[V]) levelEmpty() bool {
	return n.only == nil && (n.more == nil || len(n.more.vals) == 0 && len(n.more.globs) == 0)
}

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
	// The added pattern's own pairs: levels may hold pointers into them.
	r.root.remove(e.pattern.pairs(), e.seq)
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
// pairs are those of the pattern as added; seq is its add order.
func (n *rnode[V]) remove(pairs []Pair, seq uint64) {
	if len(pairs) == 0 {
		n.entry = nil
		return
	}
	pr := pairs[0]
	switch k := n.key(); {
	case k == pr.Key:
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
					n.only = nil
				} else {
					delete(n.more.vals, pr.Value)
				}
			}
		}
		n.narrow()
		if n.levelEmpty() {
			// The level is gone: the rest of the chain moves up.
			if s := n.skip(); s != nil {
				n.at, n.only, n.more = s.at, s.only, s.more
			} else {
				n.at, n.more = nil, nil
			}
		} else if n.at == &pairs[0] {
			// The level keeps the pair of the pattern removed: a copy,
			// so that the pattern goes.
			cp := pairs[0]
			n.at = &cp
		}
	case k != "" && pr.Key > k:
		s := n.skip()
		s.remove(pairs, seq)
		if s.at == nil {
			n.more.skip = nil
			n.narrow()
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
	if x := n.more; x != nil {
		for _, c := range x.vals {
			m = min(m, c.minSeq())
		}
		for _, g := range x.globs {
			m = min(m, g.seq)
		}
		if x.skip != nil {
			m = min(m, x.skip.minSeq())
		}
	}
	return m
}

func (n *rnode[V]) empty() bool { return n.entry == nil && n.at == nil }

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
		if n.at != nil {
			if val, ok := LookupPair(pairs, n.at.Key); ok {
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
			skip := n.skip()
			if next != nil {
				if skip != nil {
					stars = append(stars, star[V]{skip, found})
				}
				found++
				if next.entry != nil {
					data = next.entry
				} else if exact {
					data = nil
				}
				n = next
			} else {
				n = skip
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
