package config

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// templateError is a malformed path or pattern template: the offset of
// the problem in the template and the reason.
type templateError struct {
	kind   string // "path" or "pattern"
	src    string
	offset int
	reason string
}

func (e *templateError) Error() string {
	return fmt.Sprintf("bad %s template %s at offset %d: %s", e.kind, strconv.Quote(e.src), e.offset, e.reason)
}

// maxVarName is the longest variable name a template may use.
const maxVarName = 64

// pathTemplate is a parsed path template: "/" and segments, each literal
// text with variables anywhere in it ("/api/{kind}-items/{id}.json").
type pathTemplate struct {
	src  string
	segs []segment
	vars []string // names, in the order of the template
}

// segment is one segment of a path template. A literal segment has one
// lit and no vars. Otherwise lits has one more element than vars and the
// segment reads lits[0] vars[0] lits[1] ... vars[n-1] lits[n]; the inner
// lits are never empty (two variables cannot touch).
type segment struct {
	lits []string
	vars []int // indexes into pathTemplate.vars
}

func (s *segment) literal() bool { return len(s.vars) == 0 }

// bare reports whether the segment is one variable and nothing else.
func (s *segment) bare() bool { return len(s.vars) == 1 && s.lits[0] == "" && s.lits[1] == "" }

// String returns the segment as the template writes it.
func (s *segment) format(names []string) string {
	var b strings.Builder
	for i, l := range s.lits {
		b.WriteString(l)
		if i < len(s.vars) {
			b.WriteString("{" + names[s.vars[i]] + "}")
		}
	}
	return b.String()
}

// parsePath parses a path template. It starts with '/', has no empty
// segment (so no "//" and no trailing '/', "/" alone aside), no "." or
// ".." segment, and holds only characters a path may carry unescaped
// (RFC 3986's pchar, and non-ASCII UTF-8). A variable is {name}, name a
// letter or '_' then letters, digits or '_'; names are unique and two
// variables cannot touch ("{a}{b}").
func parsePath(src string) (*pathTemplate, error) {
	fail := func(off int, format string, args ...any) error {
		return &templateError{"path", src, off, fmt.Sprintf(format, args...)}
	}
	if src == "" {
		return nil, fail(0, "empty; a path starts with '/'")
	}
	if src[0] != '/' {
		return nil, fail(0, "a path starts with '/'")
	}
	if !utf8.ValidString(src) {
		return nil, fail(0, "not valid UTF-8")
	}
	t := &pathTemplate{src: src}
	if src == "/" {
		return t, nil
	}
	if strings.HasSuffix(src, "/") {
		return nil, fail(len(src)-1, "trailing '/'; routes take none (a request's trailing '/' never matches)")
	}
	at := 1
	for at <= len(src) {
		end := strings.IndexByte(src[at:], '/')
		if end < 0 {
			end = len(src)
		} else {
			end += at
		}
		seg, err := parseSegment(src, at, end, t)
		if err != nil {
			return nil, err
		}
		t.segs = append(t.segs, seg)
		at = end + 1
	}
	return t, nil
}

// parseSegment parses src[from:to], one segment of t, adding its
// variables to t.vars.
func parseSegment(src string, from, to int, t *pathTemplate) (segment, error) {
	fail := func(off int, format string, args ...any) error {
		return &templateError{"path", src, off, fmt.Sprintf(format, args...)}
	}
	text := src[from:to]
	if text == "" {
		return segment{}, fail(from, "empty segment")
	}
	if text == "." || text == ".." {
		return segment{}, fail(from, "%q segment; requests holding one are refused", text)
	}
	var seg segment
	lit := from
	for i := from; i < to; {
		c := src[i]
		switch {
		case c == '{':
			name, next, err := scanVar(src, i, to, "path")
			if err != nil {
				return segment{}, err
			}
			if len(seg.vars) > 0 && i == lit {
				return segment{}, fail(i, "variables {%s} and {%s} touch; put literal text between them", t.vars[seg.vars[len(seg.vars)-1]], name)
			}
			for _, v := range t.vars {
				if v == name {
					return segment{}, fail(i, "variable {%s} appears twice", name)
				}
			}
			seg.lits = append(seg.lits, src[lit:i])
			seg.vars = append(seg.vars, len(t.vars))
			t.vars = append(t.vars, name)
			i, lit = next, next
		case c == '}':
			return segment{}, fail(i, "'}' without '{'")
		case !pathChar(c):
			return segment{}, fail(i, "%q cannot appear in a path template (write the character itself, not its escape)", rune(c))
		default:
			i++
		}
	}
	seg.lits = append(seg.lits, src[lit:to])
	return seg, nil
}

// scanVar reads the variable starting with '{' at src[i], ending before
// limit, and returns its name and the offset after '}'.
func scanVar(src string, i, limit int, kind string) (string, int, error) {
	fail := func(off int, format string, args ...any) error {
		return &templateError{kind, src, off, fmt.Sprintf(format, args...)}
	}
	end := strings.IndexByte(src[i+1:limit], '}')
	if end < 0 {
		return "", 0, fail(i, "'{' without '}'")
	}
	name := src[i+1 : i+1+end]
	if name == "" {
		return "", 0, fail(i, "empty variable name")
	}
	if len(name) > maxVarName {
		return "", 0, fail(i+1, "variable name of %d bytes; the limit is %d", len(name), maxVarName)
	}
	for j := 0; j < len(name); j++ {
		c := name[j]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || j > 0 && '0' <= c && c <= '9') {
			return "", 0, fail(i+1+j, "bad variable name %s: a letter or '_', then letters, digits or '_'", strconv.Quote(name))
		}
	}
	return name, i + 2 + end, nil
}

// pathChar reports whether c may stand unescaped in a path template:
// RFC 3986's pchar (unreserved, sub-delims, ':' and '@') and the bytes of
// non-ASCII UTF-8.
func pathChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c >= 0x80:
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:@", c) >= 0
}

// String returns the template.
func (t *pathTemplate) String() string { return t.src }

// varIndex returns the index of the variable name, or -1.
func (t *pathTemplate) varIndex(name string) int {
	for i, v := range t.vars {
		if v == name {
			return i
		}
	}
	return -1
}

// matchSegment matches the decoded segment s against seg, appending the
// values of its variables to vals. A variable is never empty; one
// followed by literal text ends at the first occurrence of that text
// after its first byte, the last one takes what is left before the
// segment's literal end.
func matchSegment(seg *segment, s string, vals []string) ([]string, bool) {
	if seg.literal() {
		return vals, s == seg.lits[0]
	}
	if !strings.HasPrefix(s, seg.lits[0]) {
		return vals, false
	}
	i := len(seg.lits[0])
	last := len(seg.vars) - 1
	for j := range seg.vars {
		if j < last {
			next := seg.lits[j+1]
			if i >= len(s) {
				return vals, false
			}
			k := strings.Index(s[i+1:], next)
			if k < 0 {
				return vals, false
			}
			vals = append(vals, s[i:i+1+k])
			i += 1 + k + len(next)
			continue
		}
		rest, suffix := s[i:], seg.lits[j+1]
		if len(rest) <= len(suffix) || !strings.HasSuffix(rest, suffix) {
			return vals, false
		}
		vals = append(vals, rest[:len(rest)-len(suffix)])
	}
	return vals, true
}
