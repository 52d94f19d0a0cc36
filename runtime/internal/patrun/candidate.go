package patrun

import (
	"fmt"
	"slices"
	"strings"
)

// Candidate is one added pattern that matches an explained message.
type Candidate struct {
	Pattern Pattern
	// Rank is the candidate's place in precedence order, 1 for the
	// winner; 0 for a pattern the walk never reaches for this message
	// while the patterns ranked remain (its Reason says so).
	Rank int
	// Rule is why it lost to the winner ("" for the winner); Key the key
	// at which it lost ("" when none).
	Rule Rule
	Key  string
	// Reason says it in a sentence.
	Reason string
}

// Rule names a precedence rule by which a candidate loses.
type Rule string

// The precedence rules (DESIGN §2, patrun's find).
const (
	// RuleExact: at a key the message's value has an exact pattern
	// value, which is tried before any glob.
	RuleExact Rule = "exact-before-glob"
	// RuleGlobOrder: two globs at the same key match; the one added first
	// is tried first.
	RuleGlobOrder Rule = "glob-order"
	// RuleKeyOrder: the loser lacks a key (the first in byte order where
	// the two differ) that the walk matched; the walk goes back to
	// patterns without it only while it has found nothing.
	RuleKeyOrder Rule = "first-key"
	// RuleDeeper: the winner extends the loser's path: deeper wins.
	RuleDeeper Rule = "deeper"
	// RuleKept: the walk went down a branch that holds no handler for the
	// message and kept the winner, found before; it never goes back once
	// it has a handler.
	RuleKept Rule = "kept-earlier"
)

// A step of a walk through the router's tree: at a node with a level,
// the branch taken: a value, a glob, or the skip branch.
type walkChoice struct {
	kind  uint8 // choiceValue, choiceGlob, choiceSkip
	label string
}

const (
	choiceValue uint8 = iota
	choiceGlob
	choiceSkip
)

// candidates returns the patterns of r that match pairs (sorted), the
// winner first, then the others in precedence order, each with why it
// lost.
func (r *Router[V]) candidates(pairs []Pair) []Candidate {
	r.mu.RLock()
	entries := make([]*rentry[V], 0, len(r.all))
	var match []*rentry[V]
	for _, e := range r.all {
		entries = append(entries, e)
		if patternMatches(e.pattern, pairs) {
			match = append(match, e)
		}
	}
	var winner *rentry[V]
	var trace map[*rnode[V]]walkChoice
	if len(match) > 0 {
		winner, trace = r.tracedWalk(pairs)
	}
	paths := make(map[*rentry[V]][]pathStep[V], len(match))
	for _, e := range match {
		paths[e] = r.pathOf(e.pattern)
	}
	r.mu.RUnlock()
	if len(match) == 0 {
		return nil
	}
	// The order: who answers once those before are removed, from a
	// copy of the router with the same patterns in the same add order.
	slices.SortFunc(entries, func(a, b *rentry[V]) int { return int(a.seq) - int(b.seq) })
	scratch := NewRouter[uint64]()
	bySeq := make(map[uint64]*rentry[V], len(entries))
	for _, e := range entries {
		_ = scratch.Add(e.pattern, e.seq)
		bySeq[e.seq] = e
	}
	ranked := map[*rentry[V]]int{}
	var out []Candidate
	for {
		re := scratch.walkLocked(pairs)
		if re == nil {
			break
		}
		e := bySeq[re.value]
		ranked[e] = len(out) + 1
		out = append(out, Candidate{Pattern: e.pattern, Rank: len(out) + 1})
		scratch.Remove(e.pattern)
	}
	slices.SortFunc(match, func(a, b *rentry[V]) int { return int(a.seq) - int(b.seq) })
	for _, e := range match {
		if ranked[e] == 0 {
			out = append(out, Candidate{Pattern: e.pattern})
		}
	}
	if winner == nil || len(out) == 0 || !out[0].Pattern.Equal(winner.pattern) {
		return out // changed while explained: no reasons
	}
	wp := paths[winner]
	for i := range out {
		if i == 0 {
			continue
		}
		var e *rentry[V]
		for _, m := range match {
			if m.pattern.Equal(out[i].Pattern) {
				e = m
			}
		}
		out[i].Rule, out[i].Key, out[i].Reason = lossReason(paths[e], wp, trace, out[i].Pattern, winner.pattern)
		if out[i].Rank == 0 {
			out[i].Reason += "; the walk never reaches it for this message, even with the patterns above it removed: it goes back only to branches that skip a key, never to another value or glob of a key it matched"
		}
	}
	return out
}

// walkLocked is find without the exact-match shortcut, taking r.mu.
func (r *Router[V]) walkLocked(pairs []Pair) *rentry[V] {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.walk(pairs, false)
}

// patternMatches reports whether every pair of p matches pairs (sorted):
// the key is there with the value, or a value the glob matches.
func patternMatches(p Pattern, pairs []Pair) bool {
	for _, pr := range p.pairs() {
		v, ok := LookupPair(pairs, pr.Key)
		if !ok || v != pr.Value && !(IsGlob(pr.Value) && GlobMatch(pr.Value, v)) {
			return false
		}
	}
	return true
}

// pathStep is one step of a pattern's path through the tree: at node, the
// choice that leads on.
type pathStep[V any] struct {
	node   *rnode[V]
	choice walkChoice
	key    string
}

// pathOf is p's path from the root to the node where its entry sits, as
// Add made it. Callers hold r.mu.
func (r *Router[V]) pathOf(p Pattern) []pathStep[V] {
	var out []pathStep[V]
	n := &r.root
	pairs := p.pairs()
	for i := 0; i < len(pairs) && n != nil; {
		pr := pairs[i]
		if n.key() == pr.Key {
			kind := choiceValue
			var next *rnode[V]
			if IsGlob(pr.Value) {
				kind = choiceGlob
				for _, g := range n.globs() {
					if g.glob == pr.Value {
						next = g.node
					}
				}
			} else {
				next = n.val(pr.Value)
			}
			out = append(out, pathStep[V]{n, walkChoice{kind, pr.Value}, n.key()})
			n = next
			i++
			continue
		}
		out = append(out, pathStep[V]{n, walkChoice{choiceSkip, ""}, n.key()})
		n = n.skip()
	}
	return out
}

// tracedWalk is walk (not exact) recording the choice made at every node
// it passes. Callers hold r.mu.
func (r *Router[V]) tracedWalk(pairs []Pair) (*rentry[V], map[*rnode[V]]walkChoice) {
	trace := map[*rnode[V]]walkChoice{}
	var stars []*rnode[V]
	n := &r.root
	data := r.root.entry
	for n != nil {
		var next *rnode[V]
		if n.at != nil {
			c := walkChoice{kind: choiceSkip}
			if val, ok := LookupPair(pairs, n.at.Key); ok {
				if next = n.val(val); next != nil {
					c = walkChoice{choiceValue, val}
				} else {
					for _, g := range n.globs() {
						if GlobMatch(g.glob, val) {
							next, c = g.node, walkChoice{choiceGlob, g.glob}
							break
						}
					}
				}
			}
			trace[n] = c
			if next != nil {
				if s := n.skip(); s != nil {
					stars = append(stars, s)
				}
				if next.entry != nil {
					data = next.entry
				}
				n = next
			} else {
				n = n.skip()
			}
		} else {
			n = nil
		}
		if n == nil && data == nil && len(stars) > 0 {
			n = stars[len(stars)-1]
			stars = stars[:len(stars)-1]
		}
	}
	return data, trace
}

// extraPairs is what won has beyond lost when it holds every pair of
// lost, and whether it does.
func extraPairs(lost, won Pattern) (string, bool) {
	var extra []string
	for _, pr := range lost.pairs() {
		if v, ok := won.Get(pr.Key); !ok || v != pr.Value {
			return "", false
		}
	}
	for _, pr := range won.pairs() {
		if _, ok := lost.Get(pr.Key); !ok {
			extra = append(extra, pr.Key+":"+pr.Value)
		}
	}
	return strings.Join(extra, ","), len(extra) > 0
}

// lossReason says why the pattern lost, whose path is lp, to the winner,
// whose path is wp, on the walk trace.
func lossReason[V any](lp, wp []pathStep[V], trace map[*rnode[V]]walkChoice, lost, won Pattern) (Rule, string, string) {
	winnerAt := func(n *rnode[V]) bool { // the walk passed the winner's entry before n
		for _, s := range wp {
			if s.node == n {
				return false
			}
		}
		return true
	}
	if extra, ok := extraPairs(lost, won); ok {
		return RuleDeeper, "", fmt.Sprintf("deeper wins: %s matches all of it and also %s", QuoteClipped(won.String(), MaxEcho), extra)
	}
	for i := 0; i < len(lp); i++ {
		s := lp[i]
		w, seen := trace[s.node]
		if !seen {
			break
		}
		if w == s.choice {
			continue
		}
		k := s.key
		switch {
		case w.kind == choiceValue && s.choice.kind == choiceGlob:
			return RuleExact, k, fmt.Sprintf("exact before glob: at key %s the message's value %s is a pattern value, tried before the glob %s", k, w.label, s.choice.label)
		case w.kind == choiceGlob && s.choice.kind == choiceGlob:
			return RuleGlobOrder, k, fmt.Sprintf("glob order: at key %s the glob %s, added first, is tried before %s", k, w.label, s.choice.label)
		case s.choice.kind == choiceSkip && w.kind != choiceSkip:
			if i+1 < len(lp) {
				if _, back := trace[lp[i+1].node]; back {
					continue // the walk came back to the skip branch
				}
			}
			if winnerAt(s.node) {
				return RuleKept, k, fmt.Sprintf("kept earlier: the walk took %s:%s (a longer pattern with key %s), found no handler there and kept %s, found before; it never goes back once it has a handler", k, w.label, k, QuoteClipped(won.String(), MaxEcho))
			}
			return RuleKeyOrder, k, fmt.Sprintf("first key in byte order: %s has no key %s, which the walk matched (%s:%s) first; it goes back to patterns without %s only while it has found nothing", QuoteClipped(lost.String(), MaxEcho), k, k, w.label, k)
		}
		break
	}
	return "", "", "loses by the walk's order"
}
