package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/wizardmesh/wizard/runtime/pattern"
)

// patternTemplate is a parsed pattern template: a wizard pattern whose
// values may hold variables anywhere ("role:users,cmd:{action}",
// "cmd:{action}_v2"). Keys are fixed: a variable never stands in a key.
type patternTemplate struct {
	src   string
	pairs []patternPair // sorted by key, as the canonical form has them
	vars  []string      // the names used, in the order of the template
	fixed string        // the canonical form when no value holds a variable
	// fixedPat is fixed parsed, for the messages of its calls, and
	// fixedPairs its pairs (Pairs copies them on every call);
	// fixedJSON is the pairs as the members of a JSON object, written
	// once for every message.
	fixedPat   pattern.Pattern
	fixedPairs []pattern.Pair
	fixedJSON  []byte
}

// patternPair is one key of a pattern template and its value: literal
// text, or lits[0] vars[0] lits[1] ... vars[n-1] lits[n].
type patternPair struct {
	key  string
	lits []string
	vars []int // indexes into patternTemplate.vars
}

// placeholder marks a variable in the string given to
// [pattern.Parse]: a control byte (templates hold none), the
// variable's index, and the byte again. It is not a number, not null,
// and holds nothing the pattern syntax gives a meaning to.
const placeholder = '\x01'

// parsePattern parses a pattern template: each {name} is replaced by a
// placeholder, the result must be a valid, non-empty wizard pattern
// (checked with [pattern.Parse]), and every placeholder must stand
// in a value.
func parsePattern(src string) (*patternTemplate, error) {
	return parseTemplate(src, "pattern", scanVar)
}

// varScanner reads the variable starting with '{' at src[i], ending
// before limit, and returns its name and the offset after '}'.
type varScanner func(src string, i, limit int, kind string) (string, int, error)

// parseTemplate parses a pattern template of the given kind ("pattern",
// "event"), its variables read by scan.
func parseTemplate(src, kind string, scan varScanner) (*patternTemplate, error) {
	fail := func(off int, format string, args ...any) error {
		return &templateError{kind, src, off, fmt.Sprintf(format, args...)}
	}
	if strings.TrimSpace(src) == "" {
		return nil, fail(0, "empty; a pattern names at least one key")
	}
	t := &patternTemplate{src: src}
	var sub strings.Builder
	var shifts []shift // where sub's text moves against src's
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '{':
			name, next, err := scan(src, i, len(src), kind)
			if err != nil {
				return nil, err
			}
			idx := -1
			for j, v := range t.vars {
				if v == name {
					idx = j
				}
			}
			if idx < 0 {
				idx = len(t.vars)
				t.vars = append(t.vars, name)
			}
			mark := string(placeholder) + strconv.Itoa(idx) + string(placeholder)
			shifts = append(shifts, shift{sub: sub.Len(), src: i, subLen: len(mark), srcLen: next - i})
			sub.WriteString(mark)
			i = next
		case c == '}':
			return nil, fail(i, "'}' without '{'")
		case c < 0x20 || c == 0x7f:
			return nil, fail(i, "control character %q", rune(c))
		default:
			sub.WriteByte(c)
			i++
		}
	}
	p, err := pattern.Parse(sub.String())
	if err != nil {
		var pe *pattern.ParseError
		if errors.As(err, &pe) {
			return nil, fail(srcOffset(shifts, pe.Pos), "%s", pe.Reason)
		}
		return nil, fail(0, "%v", err)
	}
	if p.Len() == 0 {
		return nil, fail(0, "no key routes (keys ending in '$' and null values are dropped)")
	}
	for _, pr := range p.Pairs() {
		if strings.IndexByte(pr.Key, placeholder) >= 0 {
			return nil, fail(strings.IndexByte(src, '{'), "a variable in key %s; variables fill values only", strconv.Quote(placeholderText(pr.Key, t.vars)))
		}
		t.pairs = append(t.pairs, splitValue(pr.Key, pr.Value))
	}
	if len(t.vars) == 0 {
		t.fixed, t.fixedPat, t.fixedPairs = p.String(), p, p.Pairs()
		for i, pr := range t.fixedPairs {
			if i > 0 {
				t.fixedJSON = append(t.fixedJSON, ',')
			}
			t.fixedJSON = append(appendJSONString(t.fixedJSON, pr.Key), ':')
			t.fixedJSON = appendJSONString(t.fixedJSON, pr.Value)
		}
	}
	return t, nil
}

// shift records that src[src:src+srcLen] became sub[sub:sub+subLen].
type shift struct{ sub, src, subLen, srcLen int }

// srcOffset maps an offset in the substituted string back to src.
func srcOffset(shifts []shift, pos int) int {
	delta := 0
	for _, s := range shifts {
		if pos < s.sub {
			break
		}
		if pos < s.sub+s.subLen {
			return s.src
		}
		delta = s.src + s.srcLen - (s.sub + s.subLen)
	}
	return pos + delta
}

// splitValue splits a parsed value at its placeholders.
func splitValue(key, v string) patternPair {
	pp := patternPair{key: key}
	for {
		i := strings.IndexByte(v, placeholder)
		if i < 0 {
			pp.lits = append(pp.lits, v)
			return pp
		}
		j := strings.IndexByte(v[i+1:], placeholder) + i + 1
		n, _ := strconv.Atoi(v[i+1 : j])
		pp.lits = append(pp.lits, v[:i])
		pp.vars = append(pp.vars, n)
		v = v[j+1:]
	}
}

// placeholderText writes s back with {name} for its placeholders.
func placeholderText(s string, names []string) string {
	pp := splitValue("", s)
	var b strings.Builder
	for i, l := range pp.lits {
		b.WriteString(l)
		if i < len(pp.vars) {
			b.WriteString("{" + names[pp.vars[i]] + "}")
		}
	}
	return b.String()
}

// fill writes the canonical pattern with the variables' values: the
// value of t.vars[i] is vals[idx[i]]. Values are quoted where a bare one
// would not read back as itself.
func (t *patternTemplate) fill(vals []string, idx []int) string {
	if t.fixed != "" {
		return t.fixed
	}
	n := 0
	for _, pp := range t.pairs {
		n += len(pp.key) + 4
		for _, l := range pp.lits {
			n += len(l)
		}
		for _, v := range pp.vars {
			n += len(vals[idx[v]]) + 2
		}
	}
	var b strings.Builder
	b.Grow(n)
	var room [64]byte
	for i, pp := range t.pairs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(pp.key)
		b.WriteByte(':')
		v := room[:0]
		for j, l := range pp.lits {
			v = append(v, l...)
			if j < len(pp.vars) {
				v = append(v, vals[idx[pp.vars[j]]]...)
			}
		}
		writeValue(&b, v)
	}
	return b.String()
}

// writeValue writes v, quoted unless it is a plain word that
// [pattern.Parse] reads back unchanged.
func writeValue(b *strings.Builder, v []byte) {
	if !needsQuote(v) {
		b.Write(v)
		return
	}
	b.WriteByte('"')
	for _, c := range v {
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
}

// needsQuote reports whether v must be quoted in a pattern: anything but
// a word that starts with a letter or '_' and holds only letters,
// digits and "_-./@+~", and is not "null". This quotes more than the
// parser needs (numbers, spaces, non-ASCII), never less.
func needsQuote(v []byte) bool {
	if len(v) == 0 || string(v) == "null" {
		return true
	}
	if c := v[0]; !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
		return true
	}
	for _, c := range v {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("_-./@+~", c) >= 0:
		default:
			return true
		}
	}
	return false
}
