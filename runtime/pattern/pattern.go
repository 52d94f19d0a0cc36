package pattern

import "github.com/wizardmesh/wizard/runtime/internal/patrun"

// Pattern is a parsed, canonical set of key:value pairs. The zero Pattern
// is the empty (catch-all) pattern. Patterns are immutable and cheap to
// copy; compare them with Equal or by their canonical String.
//
// Its methods: String (the canonical form), Len (the number of pairs),
// Pairs (a copy, sorted by key), Get (the value of a key), Equal, HasGlob
// (some value holds '*' or '?'), and With (the pattern with the pairs of
// another, whose values win).
type Pattern = patrun.Pattern

// Pair is one key:value element of a [Pattern]. Values are always
// strings; see [Parse] for how numbers and booleans are normalised.
type Pair = patrun.Pair

// ParseError reports a malformed pattern string: the input (Pattern), the
// byte offset of the problem in it (Pos) and the Reason. Its message
// repeats at most the first 128 bytes of the input.
type ParseError = patrun.ParseError

// Parse parses a pattern string of the form key:value[,key:value...].
//
// Whitespace around keys, colons and commas is ignored. A value may be
// double-quoted to hold ',' ':' or surrounding spaces; inside quotes, \"
// and \\ escape a quote and a backslash. Unquoted values that are JSON
// numbers are normalised the way JavaScript prints them (1.0 is "1", 1e3
// is "1000"), so a pattern matches messages carrying the number or its
// string; the unquoted word null drops its key. Keys ending in '$' are
// metadata and are dropped. Empty keys, a missing colon or value, and
// duplicate keys are errors reported as a [*ParseError]. The empty string
// is the empty pattern.
//
// Parsing takes O(n log n) time in the number of keys.
func Parse(s string) (Pattern, error) { return patrun.Parse(s) }

// MustParse is like [Parse] but panics on a malformed pattern. It is meant
// for patterns fixed at compile time.
func MustParse(s string) Pattern { return patrun.MustParse(s) }
