package jsonic

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SyntaxError is malformed input: what is wrong and where.
type SyntaxError struct {
	Input string
	// Offset is the byte offset of the problem in Input; Line and Column
	// (in characters) count from 1.
	Offset, Line, Column int
	Reason               string
}

// Error says where and what, e.g. "at offset 4 (line 1, column 5):
// missing ':' after key \"b\"".
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("at offset %d (line %d, column %d): %s", e.Offset, e.Line, e.Column, e.Reason)
}

// Caret returns the line of Input holding the problem and, below it, a
// caret under the column: for a terminal.
func (e *SyntaxError) Caret() string {
	start := strings.LastIndexByte(e.Input[:e.Offset], '\n') + 1
	end := strings.IndexByte(e.Input[e.Offset:], '\n')
	if end < 0 {
		end = len(e.Input)
	} else {
		end += e.Offset
	}
	line := e.Input[start:end]
	return line + "\n" + strings.Repeat(" ", utf8.RuneCountInString(e.Input[start:e.Offset])) + "^"
}

// maxDepth bounds nesting, so that hostile input cannot exhaust the stack.
const maxDepth = 512

// Parse parses s: an object (with or without its braces), a list, or a
// single value. Empty input (spaces only) is an empty object.
func Parse(s string) (any, error) {
	p := &parser{s: s}
	if !utf8.ValidString(s) {
		for i, r := range s {
			if r == utf8.RuneError {
				return nil, p.errorf(i, "not UTF-8")
			}
		}
	}
	p.space()
	if p.i == len(s) {
		return map[string]any{}, nil
	}
	var v any
	var err error
	if c := s[p.i]; c == '{' || c == '[' || !p.implicitObject() {
		v, err = p.value(0)
	} else {
		v, err = p.members(0, false)
	}
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i < len(s) {
		return nil, p.errorf(p.i, "unexpected %s after the value", p.what())
	}
	return v, nil
}

// ParseObject is [Parse] for input that must be an object.
func ParseObject(s string) (map[string]any, error) {
	v, err := Parse(s)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &SyntaxError{Input: s, Offset: 0, Line: 1, Column: 1, Reason: fmt.Sprintf("want an object (key:value pairs), not %s", kind(v))}
	}
	return m, nil
}

func kind(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

type parser struct {
	s string
	i int
}

func (p *parser) errorf(at int, format string, args ...any) *SyntaxError {
	line, col := 1, 1
	for _, r := range p.s[:at] {
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return &SyntaxError{Input: p.s, Offset: at, Line: line, Column: col, Reason: fmt.Sprintf(format, args...)}
}

// what names the character at p.i, for an error.
func (p *parser) what() string {
	if p.i >= len(p.s) {
		return "end of input"
	}
	r, _ := utf8.DecodeRuneInString(p.s[p.i:])
	return strconv.QuoteRune(r)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (p *parser) space() {
	for p.i < len(p.s) && isSpace(p.s[p.i]) {
		p.i++
	}
}

// implicitObject reports whether the input at p.i starts with a key
// followed by ':' (top-level pairs without braces).
func (p *parser) implicitObject() bool {
	q := &parser{s: p.s, i: p.i}
	if _, err := q.key(); err != nil {
		return false
	}
	q.space()
	return q.i < len(q.s) && q.s[q.i] == ':'
}

// members reads key:value pairs up to '}' (braced) or the end of input.
func (p *parser) members(depth int, braced bool) (map[string]any, error) {
	m := map[string]any{}
	for {
		p.space()
		if p.i == len(p.s) {
			if braced {
				return nil, p.errorf(p.i, "unterminated object: missing '}'")
			}
			return m, nil
		}
		if braced && p.s[p.i] == '}' {
			p.i++
			return m, nil
		}
		at := p.i
		k, err := p.key()
		if err != nil {
			return nil, err
		}
		if _, dup := m[k]; dup {
			return nil, p.errorf(at, "duplicate key %q", k)
		}
		p.space()
		if p.i == len(p.s) || p.s[p.i] != ':' {
			return nil, p.errorf(p.i, "missing ':' after key %q (found %s)", k, p.what())
		}
		p.i++
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m[k] = v
		p.space()
		switch {
		case p.i == len(p.s):
		case p.s[p.i] == ',':
			p.i++
		case braced && p.s[p.i] == '}':
		default:
			return nil, p.errorf(p.i, "expected ',' or %s after the value of %q, found %s", closer(braced, '}'), k, p.what())
		}
	}
}

func closer(braced bool, c byte) string {
	if braced {
		return "'" + string(c) + "'"
	}
	return "the end"
}

// key reads a bare or quoted key.
func (p *parser) key() (string, error) {
	if p.i < len(p.s) && (p.s[p.i] == '"' || p.s[p.i] == '\'') {
		return p.quoted()
	}
	start := p.i
	for p.i < len(p.s) && !isSpace(p.s[p.i]) && !strings.ContainsRune(":,{}[]\"'", rune(p.s[p.i])) {
		p.i++
	}
	if p.i == start {
		return "", p.errorf(p.i, "expected a key, found %s", p.what())
	}
	return p.s[start:p.i], nil
}

// value reads one value.
func (p *parser) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, p.errorf(p.i, "nested more than %d deep", maxDepth)
	}
	p.space()
	if p.i == len(p.s) {
		return nil, p.errorf(p.i, "missing value")
	}
	switch p.s[p.i] {
	case '{':
		p.i++
		return p.members(depth, true)
	case '[':
		p.i++
		return p.list(depth)
	case '"', '\'':
		return p.quoted()
	case ',', '}', ']', ':':
		return nil, p.errorf(p.i, "missing value before %s", p.what())
	}
	start := p.i
	for p.i < len(p.s) && !strings.ContainsRune(",{}[]", rune(p.s[p.i])) {
		if c := p.s[p.i]; c == ':' || c == '"' || c == '\'' {
			return nil, p.errorf(p.i, "a bare value cannot hold %s: quote the value", p.what())
		}
		p.i++
	}
	if p.i < len(p.s) && (p.s[p.i] == '{' || p.s[p.i] == '[') {
		return nil, p.errorf(p.i, "a bare value cannot hold %s: quote the value", p.what())
	}
	raw := strings.TrimRight(p.s[start:p.i], " \t\r\n")
	switch raw {
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "null":
		return nil, nil
	}
	if isNumber(raw) {
		return json.Number(raw), nil
	}
	return raw, nil
}

// list reads values up to ']'.
func (p *parser) list(depth int) ([]any, error) {
	out := []any{}
	for {
		p.space()
		if p.i == len(p.s) {
			return nil, p.errorf(p.i, "unterminated list: missing ']'")
		}
		if p.s[p.i] == ']' {
			p.i++
			return out, nil
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		p.space()
		switch {
		case p.i == len(p.s):
		case p.s[p.i] == ',':
			p.i++
		case p.s[p.i] == ']':
		default:
			return nil, p.errorf(p.i, "expected ',' or ']' after a list item, found %s", p.what())
		}
	}
}

// quoted reads a quoted string: "..." with JSON's escapes, '...' with \'
// and \\.
func (p *parser) quoted() (string, error) {
	start := p.i
	q := p.s[p.i]
	p.i++
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == q:
			p.i++
			if q == '"' {
				var s string
				if err := json.Unmarshal([]byte(p.s[start:p.i]), &s); err != nil {
					return "", p.errorf(start, "bad quoted string: %v", err)
				}
				return s, nil
			}
			return b.String(), nil
		case c == '\\':
			if q == '"' {
				p.i += 2 // checked by json.Unmarshal at the end
				continue
			}
			if p.i+1 < len(p.s) && (p.s[p.i+1] == '\'' || p.s[p.i+1] == '\\') {
				b.WriteByte(p.s[p.i+1])
				p.i += 2
				continue
			}
			return "", p.errorf(p.i, `bad escape in '...': only \' and \\`)
		case c < 0x20:
			return "", p.errorf(p.i, "control character in a quoted string")
		}
		b.WriteByte(c)
		p.i++
	}
	return "", p.errorf(start, "unterminated quoted string")
}

// isNumber reports whether s is a JSON number.
func isNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	return i == len(s)
}
