package pattern

import "github.com/wizardmesh/wizard/runtime/internal/patrun"

// Router maps patterns to values and finds the best pattern for a message
// with Seneca's precedence (see the package documentation, # Precedence).
// It is the matcher inside a node, exported so it can be used and tested
// on its own. A Router is safe for concurrent use.
//
// Its methods: Add (a pattern with its value; adding an identical pattern
// twice is an error), Remove, Find (the value and pattern that best match
// a message's root-level scalar fields), FindExact (as Find, but only a
// pattern whose walk tested every routed key of the message), List (the
// patterns in canonical order), RoutesBy (whether some pattern has a key)
// and Len. After a removal it answers as a router built from the
// remaining patterns would.
//
// The zero Router is not ready for use; call [NewRouter].
type Router[V any] = patrun.Router[V]

// NewRouter returns an empty router.
func NewRouter[V any]() *Router[V] { return patrun.NewRouter[V]() }

// Candidate is one added pattern that matches an explained message (as
// runtime's Node.Explain lists them): the Pattern; its Rank in precedence
// order, 1 for the winner, 0 for a pattern the walk never reaches for this
// message while the patterns ranked remain; the [Rule] by which it lost to
// the winner and the Key at which it lost ("" for the winner, or when
// none); and the Reason in a sentence.
type Candidate = patrun.Candidate

// Rule names a precedence rule by which a [Candidate] loses.
type Rule = patrun.Rule

// The precedence rules.
const (
	// RuleExact: at a key the message's value has an exact pattern
	// value, which is tried before any glob.
	RuleExact = patrun.RuleExact
	// RuleGlobOrder: two globs at the same key match; the one added first
	// is tried first.
	RuleGlobOrder = patrun.RuleGlobOrder
	// RuleKeyOrder: the loser lacks a key (the first in byte order where
	// the two differ) that the walk matched; the walk goes back to
	// patterns without it only while it has found nothing.
	RuleKeyOrder = patrun.RuleKeyOrder
	// RuleDeeper: the winner extends the loser's path: deeper wins.
	RuleDeeper = patrun.RuleDeeper
	// RuleKept: the walk went down a branch that holds no handler for the
	// message and kept the winner, found before; it never goes back once
	// it has a handler.
	RuleKept = patrun.RuleKept
)
