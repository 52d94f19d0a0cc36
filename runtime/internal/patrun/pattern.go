package patrun

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Pair is one key:value element of a [Pattern]. Values are always strings;
// see [Parse] for how numbers and booleans are normalised.
type Pair struct {
	Key   string
	Value string
}

// Pattern is a parsed, canonical set of key:value pairs. The zero Pattern is
// the empty (catch-all) pattern. Patterns are immutable and cheap to copy;
// compare them with [Pattern.Equal] or by their canonical [Pattern.String].
type Pattern struct {
	p *pattern
}

type pattern struct {
	pairs []Pair // sorted by key, byte order
	str   string // canonical form
	glob  bool   // some value holds * or ?
}

// ParseError reports a malformed pattern string.
type ParseError struct {
	Pattern string // the input
	Pos     int    // byte offset of the problem in Pattern
	Reason  string
}

// Error names the pattern (its first bytes when it is long: a peer's may
// be as large as a frame), the offset and the reason.
func (e *ParseError) Error() string {
	if len(e.Pattern) <= MaxEcho || e.Pos < MaxEcho-16 {
		return fmt.Sprintf("wizard: bad pattern %s at offset %d: %s", QuoteClipped(e.Pattern, MaxEcho), e.Pos, e.Reason)
	}
	// The offset is past what the message repeats: show what is there.
	from := clipStart(e.Pattern, e.Pos-16)
	to := clipStart(e.Pattern, min(len(e.Pattern), from+32))
	near := "…" + strconv.Quote(e.Pattern[from:to])
	if to < len(e.Pattern) {
		near += "…"
	}
	return fmt.Sprintf("wizard: bad pattern %s at offset %d (%s): %s", QuoteClipped(e.Pattern, MaxEcho), e.Pos, near, e.Reason)
}

// The bytes of a pattern, and of a key, that an error message repeats.
const (
	MaxEcho    = 128
	MaxEchoKey = 64
)

// QuoteClipped quotes s for a message, cut to its first max bytes (at a
// character boundary) followed by "… (N bytes)" when it is longer.
func QuoteClipped(s string, max int) string {
	if len(s) <= max {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:clipStart(s, max)]) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// clipStart backs i off to the start of the character of s it falls in.
func clipStart(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// Parse parses a pattern string of the form key:value[,key:value...].
//
// Whitespace around keys, colons and commas is ignored. A value may be
// double-quoted to hold ',' ':' or surrounding spaces; inside quotes, \" and
// \\ escape a quote and a backslash. Unquoted values that are JSON numbers are
// normalised the way JavaScript prints them (1.0 is "1", 1e3 is "1000"), so a
// pattern matches messages carrying the number or its string; the unquoted
// word null drops its key. Keys ending in '$' are metadata and are dropped.
// Empty keys, a missing colon or value, and duplicate keys are errors
// reported as a [*ParseError]. The empty string is the empty pattern.
//
// Parsing takes O(n log n) time in the number of keys.
func Parse(s string) (Pattern, error) { return ParseMax(s, 0) }

// ParseMax is [Parse] refusing more than maxKeys keys (those
// dropped included) when maxKeys > 0.
func ParseMax(s string, maxKeys int) (Pattern, error) {
	var room [8]keyAt
	pairs, keys, err := scanPattern(s, room[:0], maxKeys)
	// A duplicate comes first: the scan would have stopped there, before
	// anything wrong further on.
	if dup, ok := firstDuplicate(keys); ok {
		return Pattern{}, &ParseError{s, dup.pos, "duplicate key " + QuoteClipped(dup.key, MaxEchoKey)}
	}
	if err != nil {
		return Pattern{}, err
	}
	return newPatternFrom(pairs, s), nil
}

// maxPresizedPairs bounds the pairs scanPattern makes room for before
// reading them: past it the array grows as pairs are read.
const maxPresizedPairs = 64

// keyAt is a key of a pattern string and its offset there.
type keyAt struct {
	key string
	pos int
}

// scanPattern reads s's pairs, appending every key, dropped or not, to
// keys in the order of s. It checks everything but duplicates; on an error
// keys holds the keys of the pairs read before it.
func scanPattern(s string, keys []keyAt, maxKeys int) ([]Pair, []keyAt, *ParseError) {
	var pairs []Pair
	if s != "" {
		// As many pairs as commas and one (more only where a quoted value
		// holds a comma or a key is dropped): the pattern keeps this
		// array, so growing it by doubling would leave it up to twice
		// too large.
		pairs = make([]Pair, 0, min(strings.Count(s, ",")+1, maxPresizedPairs))
	}
	i := 0
	for {
		i = skipSpace(s, i)
		if i == len(s) {
			if len(keys) > 0 { // dropped keys count: "a:null," is malformed too
				return nil, keys, &ParseError{s, i, "empty pair after ','"}
			}
			return pairs, keys, nil
		}
		keyStart := i
		for i < len(s) && s[i] != ':' && s[i] != ',' && s[i] != '"' && !isSpace(s[i]) {
			i++
		}
		key := s[keyStart:i]
		if key == "" {
			switch {
			case i < len(s) && s[i] == '"':
				return nil, keys, &ParseError{s, i, "keys cannot be quoted"}
			case i < len(s) && s[i] == ',' || i == len(s):
				return nil, keys, &ParseError{s, i, "empty pair"}
			default:
				return nil, keys, &ParseError{s, i, "empty key"}
			}
		}
		if maxKeys > 0 && len(keys) == maxKeys {
			return nil, keys, &ParseError{s, keyStart, fmt.Sprintf("more than %d keys", maxKeys)}
		}
		i = skipSpace(s, i)
		if i == len(s) || s[i] != ':' {
			if i < len(s) && s[i] != ',' {
				return nil, keys, &ParseError{s, i, fmt.Sprintf("key %s holds a space or quote", QuoteClipped(key, MaxEchoKey))}
			}
			return nil, keys, &ParseError{s, i, fmt.Sprintf("missing ':' after key %s", QuoteClipped(key, MaxEchoKey))}
		}
		i = skipSpace(s, i+1)
		var value string
		drop := false
		if i < len(s) && s[i] == '"' {
			v, next, err := unquote(s, i)
			if err != nil {
				return nil, keys, err
			}
			value, i = v, next
		} else {
			valStart := i
			for i < len(s) && s[i] != ',' {
				if s[i] == '"' || s[i] == ':' {
					return nil, keys, &ParseError{s, i, fmt.Sprintf("unquoted value of %s holds %q; quote the value", QuoteClipped(key, MaxEchoKey), s[i])}
				}
				i++
			}
			raw := strings.TrimRight(s[valStart:i], " \t\r\n")
			if raw == "" {
				return nil, keys, &ParseError{s, valStart, fmt.Sprintf("missing value for key %s", QuoteClipped(key, MaxEchoKey))}
			}
			if raw == "null" {
				drop = true
			}
			value = normalizeBare(raw)
		}
		keys = append(keys, keyAt{key, keyStart})
		if !drop && !IsMetaKey(key) {
			pairs = append(pairs, Pair{key, value})
		}
		i = skipSpace(s, i)
		if i == len(s) {
			return pairs, keys, nil
		}
		if s[i] != ',' {
			return nil, keys, &ParseError{s, i, "expected ',' after value"}
		}
		i++
	}
}

// firstDuplicate returns the first key of keys (in the order of the
// string) that an earlier key repeats. It may reorder keys. Few keys are
// compared pairwise; more are sorted, so that n keys cost O(n log n).
func firstDuplicate(keys []keyAt) (keyAt, bool) {
	if len(keys) <= 8 {
		for i := 1; i < len(keys); i++ {
			for j := range i {
				if keys[i].key == keys[j].key {
					return keys[i], true
				}
			}
		}
		return keyAt{}, false
	}
	slices.SortFunc(keys, func(a, b keyAt) int {
		return cmp.Or(strings.Compare(a.key, b.key), cmp.Compare(a.pos, b.pos))
	})
	first, ok := keyAt{}, false
	for i := 1; i < len(keys); i++ {
		if keys[i].key == keys[i-1].key && (!ok || keys[i].pos < first.pos) {
			first, ok = keys[i], true
		}
	}
	return first, ok
}

// MustParse is like [Parse] but panics on a malformed pattern.
// It is meant for patterns fixed at compile time.
func MustParse(s string) Pattern {
	p, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return p
}

// patternOf builds a pattern from pairs, which need not be sorted. Values are
// taken verbatim (no number normalisation). It returns an error for an empty
// or duplicate key.
func patternOf(pairs ...Pair) (Pattern, error) {
	ps := make([]Pair, 0, len(pairs))
	for _, p := range pairs {
		if p.Key == "" || strings.ContainsAny(p.Key, ",:\" \t\r\n") {
			return Pattern{}, fmt.Errorf("wizard: bad pattern key %q", p.Key)
		}
		if IsMetaKey(p.Key) {
			continue
		}
		for _, q := range ps {
			if q.Key == p.Key {
				return Pattern{}, fmt.Errorf("wizard: duplicate pattern key %q", p.Key)
			}
		}
		ps = append(ps, p)
	}
	return New(ps), nil
}

// New takes ownership of pairs.
func New(pairs []Pair) Pattern { return newPatternFrom(pairs, "") }

// newPatternFrom is New for pairs parsed from src. The pattern
// holds no string but its canonical form: src when it is canonical, else
// a copy that its pairs are made to point into. So a pattern costs about
// its canonical form whatever it was parsed from (a frame, a catalog).
func newPatternFrom(pairs []Pair, src string) Pattern {
	if len(pairs) == 0 {
		return Pattern{}
	}
	slices.SortFunc(pairs, func(a, b Pair) int { return strings.Compare(a.Key, b.Key) })
	p := &pattern{pairs: pairs}
	if b := AppendCanonical(nil, pairs); string(b) == src {
		p.str = src
	} else {
		p.str = string(b)
		pointInto(pairs, p.str)
	}
	for _, pr := range pairs {
		if IsGlob(pr.Value) {
			p.glob = true
		}
	}
	return Pattern{p}
}

// pointInto makes the keys and values of pairs substrings of str, their
// canonical form; a quoted value, which str holds escaped, is copied.
func pointInto(pairs []Pair, str string) {
	at := 0
	for i, pr := range pairs {
		pairs[i].Key = str[at : at+len(pr.Key)]
		at += len(pr.Key) + 1 // the key and ':'
		if needsQuote(pr.Value) {
			pairs[i].Value = strings.Clone(pr.Value)
			at += len(appendValue(nil, pr.Value))
		} else {
			pairs[i].Value = str[at : at+len(pr.Value)]
			at += len(pr.Value)
		}
		at++ // ','
	}
}

// size estimates the bytes p holds, for the caches that bound theirs:
// the canonical form, a quoted value copied besides (counted as the form
// again), the pairs and the two headers.
func (p Pattern) size() int {
	if p.p == nil {
		return 0
	}
	return 2*len(p.p.str) + 32*cap(p.p.pairs) + 64
}

// String returns the canonical form: keys in byte order, k:v joined by ','.
// Values that would not parse back to themselves are quoted.
func (p Pattern) String() string {
	if p.p == nil {
		return ""
	}
	return p.p.str
}

// Len returns the number of pairs.
func (p Pattern) Len() int {
	if p.p == nil {
		return 0
	}
	return len(p.p.pairs)
}

// Pairs returns a copy of the pairs, sorted by key.
func (p Pattern) Pairs() []Pair {
	if p.p == nil {
		return nil
	}
	return slices.Clone(p.p.pairs)
}

// Get returns the value for key.
func (p Pattern) Get(key string) (string, bool) {
	if p.p == nil {
		return "", false
	}
	for _, pr := range p.p.pairs {
		if pr.Key == key {
			return pr.Value, true
		}
	}
	return "", false
}

// Equal reports whether p and q have the same pairs.
func (p Pattern) Equal(q Pattern) bool { return p.String() == q.String() }

// HasGlob reports whether a value of p holds a glob character (* or ?).
func (p Pattern) HasGlob() bool { return p.p != nil && p.p.glob }

func (p Pattern) pairs() []Pair {
	if p.p == nil {
		return nil
	}
	return p.p.pairs
}

// With returns p with the pairs of q added; q wins on a shared key.
func (p Pattern) With(q Pattern) Pattern {
	if q.Len() == 0 {
		return p
	}
	if p.Len() == 0 {
		return q
	}
	out := make([]Pair, 0, p.Len()+q.Len())
	out = append(out, q.pairs()...)
	for _, pr := range p.pairs() {
		if _, ok := q.Get(pr.Key); !ok {
			out = append(out, pr)
		}
	}
	return New(out)
}

func IsMetaKey(k string) bool { return strings.HasSuffix(k, "$") }

func IsGlob(v string) bool { return strings.ContainsAny(v, "*?") }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// unquote reads a double-quoted value starting at s[i] == '"'.
func unquote(s string, i int) (string, int, *ParseError) {
	start := i
	i++
	var b strings.Builder
	for i < len(s) {
		c := s[i]
		switch c {
		case '"':
			return b.String(), i + 1, nil
		case '\\':
			if i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
				b.WriteByte(s[i+1])
				i += 2
				continue
			}
			return "", 0, &ParseError{s, i, `bad escape in quoted value; only \" and \\ are allowed`}
		}
		b.WriteByte(c)
		i++
	}
	return "", 0, &ParseError{s, start, "unterminated quoted value"}
}

// needsQuote reports whether v, written bare, would not parse back to v.
func needsQuote(v string) bool {
	if v == "" || v == "null" || isSpace(v[0]) || isSpace(v[len(v)-1]) {
		return true
	}
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case ',', ':', '"', '\\':
			return true
		}
	}
	if c := v[0]; c == '-' || isDigit(c) {
		return normalizeBare(v) != v
	}
	return false
}

// AppendCanonical writes pairs (sorted) in canonical form.
func AppendCanonical(b []byte, pairs []Pair) []byte {
	for i, p := range pairs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, p.Key...)
		b = append(b, ':')
		b = appendValue(b, p.Value)
	}
	return b
}

func appendValue(b []byte, v string) []byte {
	if !needsQuote(v) {
		return append(b, v...)
	}
	b = append(b, '"')
	for i := 0; i < len(v); i++ {
		if v[i] == '"' || v[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, v[i])
	}
	return append(b, '"')
}
