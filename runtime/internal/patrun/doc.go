// Package patrun holds wizard's patterns and the patrun matcher: parsing
// and the canonical form, how message values compare (1 == "1" == 1.0),
// globs, the [Router] and why a matching pattern loses to another
// ([Candidate]).
//
// Package runtime/pattern is its public face: it re-exports [Pattern],
// [Pair], [ParseError], [Router] and [Candidate] with their doc. What is
// exported here beyond those is for the runtime's own use: the no-copy
// views and router lookups its call path needs, as functions, so that
// they never become methods a user of runtime/pattern sees.
package patrun

// PairsOf returns p's pairs, sorted by key, without copying them: the
// caller must not modify them.
func PairsOf(p Pattern) []Pair { return p.pairs() }

// Size estimates the bytes p holds, for caches that bound theirs.
func Size(p Pattern) int { return p.size() }

// Added returns the pattern in r whose canonical form is s, and whether
// there is one: a caller that would parse s can share it instead.
func Added[V any](r *Router[V], s string) (Pattern, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if e := r.all[s]; e != nil {
		return e.pattern, true
	}
	return Pattern{}, false
}

// Exact returns the value added for exactly p, and whether there is one.
// Matches reports whether every pair of p is in pairs (sorted), with
// its value or a value p's glob matches: whether p would take a message
// of pairs, whatever other patterns a router holds.
func Matches(p Pattern, pairs []Pair) bool { return patternMatches(p, pairs) }

func Exact[V any](r *Router[V], p Pattern) (V, bool) { return valueOf(r.exactEntry(p)) }

// FindPattern returns the value of the best match for a message whose
// routed pairs are exactly p's, and whether there is one.
func FindPattern[V any](r *Router[V], p Pattern) (V, bool) { return valueOf(r.findPattern(p)) }

// FindPairs returns the value of the best match for sorted routed pairs,
// and whether there is one.
func FindPairs[V any](r *Router[V], pairs []Pair) (V, bool) { return valueOf(r.find(pairs, false)) }

// Candidates returns the patterns of r that match sorted routed pairs,
// the winner first, then the others in precedence order, each with why
// it lost.
func Candidates[V any](r *Router[V], pairs []Pair) []Candidate { return r.candidates(pairs) }

func valueOf[V any](e *rentry[V]) (V, bool) {
	if e == nil {
		var zero V
		return zero, false
	}
	return e.value, true
}
