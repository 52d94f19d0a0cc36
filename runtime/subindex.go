package runtime

import (
	"slices"

	"github.com/wizardmesh/wizard/runtime/internal/patrun"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// subIndex finds the subscriptions an event's pairs match without testing
// each one: a trie of the subscriptions' exact pairs in key order, so that
// an event visits only the subscriptions whose exact pairs it has. With a
// thousand subscriptions that differ by one value (user:{id}), an event
// tests one, not a thousand. A subscription with a glob value sits where
// its exact pairs lead and is tested there in full.
//
// An index is immutable: a change of subscriptions builds a new one.
type subIndex[S any] struct {
	root subNode
	subs []S // by position, the order they were given in
}

type subNode struct {
	kids map[pattern.Pair]*subNode
	here []subAt
}

// subAt is a subscription at the node its exact pairs lead to; a pattern
// with a glob value is tested in full (check).
type subAt struct {
	pos   int
	check bool
	p     pattern.Pattern
}

// newSubIndex indexes subs by the pattern patternOf gives each.
func newSubIndex[S any](subs []S, patternOf func(S) pattern.Pattern) *subIndex[S] {
	x := &subIndex[S]{subs: subs}
	for i, s := range subs {
		p := patternOf(s)
		nd, glob := &x.root, false
		for _, pr := range patrun.PairsOf(p) {
			if patrun.IsGlob(pr.Value) {
				glob = true
				continue
			}
			kid := nd.kids[pr]
			if kid == nil {
				if nd.kids == nil {
					nd.kids = map[pattern.Pair]*subNode{}
				}
				kid = &subNode{}
				nd.kids[pr] = kid
			}
			nd = kid
		}
		nd.here = append(nd.here, subAt{pos: i, check: glob, p: p})
	}
	return x
}

// all returns the subscriptions indexed, in their order (none for a nil
// index).
func (x *subIndex[S]) all() []S {
	if x == nil {
		return nil
	}
	return x.subs
}

// match appends to buf the positions of the subscriptions pairs (sorted
// by key, as every event's are) matches, in the order the subscriptions
// were given.
func (x *subIndex[S]) match(pairs []pattern.Pair, buf []int) []int {
	if x == nil {
		return buf
	}
	start := len(buf)
	buf = x.root.match(pairs, 0, buf)
	slices.Sort(buf[start:])
	return buf
}

// match visits nd and the nodes below it that pairs[from:] lead to;
// pairs is the whole event, which a glob's subscription is tested on.
func (nd *subNode) match(pairs []pattern.Pair, from int, buf []int) []int {
	for _, s := range nd.here {
		if !s.check || patrun.Matches(s.p, pairs) {
			buf = append(buf, s.pos)
		}
	}
	if len(nd.kids) == 0 {
		return buf
	}
	// A subscription's exact pairs are a path in key order; the event's
	// pairs after the one that led here can only continue it.
	for i := from; i < len(pairs); i++ {
		if kid := nd.kids[pairs[i]]; kid != nil {
			buf = kid.match(pairs, i+1, buf)
		}
	}
	return buf
}
