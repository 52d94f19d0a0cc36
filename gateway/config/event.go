package config

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/wizardmesh/wizard/runtime/pattern"
)

// The identity values an event template may hold: the verified
// subject, and a claim by name.
const (
	identSubject     = "auth.subject"
	identClaimPrefix = "auth.claims."
)

// EventTemplate is one entry of a route's events: a pattern whose
// values may hold the verified identity's {auth.subject} and
// {auth.claims.NAME} ("role:match,event:found,user:{auth.subject}").
// [EventTemplate.Fill] makes it the pattern a connection may subscribe
// to; [Covers] says whether a client's pattern stays within it.
type EventTemplate struct {
	t *patternTemplate
	// claims holds, per variable of t, the claim it reads ("": the
	// subject).
	claims []string
}

// parseEvent parses an event template.
func parseEvent(src string) (*EventTemplate, error) {
	t, err := parseTemplate(src, "event", scanIdentityVar)
	if err != nil {
		return nil, err
	}
	e := &EventTemplate{t: t, claims: make([]string, len(t.vars))}
	for i, name := range t.vars {
		e.claims[i] = strings.TrimPrefix(name, identClaimPrefix)
		if name == identSubject {
			e.claims[i] = ""
		}
	}
	return e, nil
}

// scanIdentityVar reads {auth.subject} or {auth.claims.NAME}, NAME
// letters, digits, '_' or '-'.
func scanIdentityVar(src string, i, limit int, kind string) (string, int, error) {
	fail := func(off int, format string, args ...any) error {
		return &templateError{kind, src, off, fmt.Sprintf(format, args...)}
	}
	end := strings.IndexByte(src[i+1:limit], '}')
	if end < 0 {
		return "", 0, fail(i, "'{' without '}'")
	}
	name := src[i+1 : i+1+end]
	next := i + 2 + end
	if name == identSubject {
		return name, next, nil
	}
	claim, ok := strings.CutPrefix(name, identClaimPrefix)
	if !ok {
		return "", 0, fail(i, "{%s} is not an identity value: an event template takes {%s} or {%sNAME}", name, identSubject, identClaimPrefix)
	}
	if claim == "" || len(claim) > maxVarName {
		return "", 0, fail(i, "{%s}: a claim's name is 1 to %d bytes", name, maxVarName)
	}
	for j := 0; j < len(claim); j++ {
		if c := claim[j]; !(c == '_' || c == '-' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return "", 0, fail(i+1+len(identClaimPrefix)+j, "bad claim name %s: letters, digits, '_' or '-'", strconv.Quote(claim))
		}
	}
	return name, next, nil
}

// String returns the template as the file writes it.
func (e *EventTemplate) String() string { return e.t.src }

// UsesIdentity reports whether the template holds an identity value.
func (e *EventTemplate) UsesIdentity() bool { return len(e.claims) > 0 }

// Keys returns the template's keys, sorted.
func (e *EventTemplate) Keys() []string {
	out := make([]string, len(e.t.pairs))
	for i, pp := range e.t.pairs {
		out[i] = pp.key
	}
	return out
}

// Claims returns the names of the claims the template reads, without
// repeats.
func (e *EventTemplate) Claims() []string {
	var out []string
	for _, c := range e.claims {
		if c != "" && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// Fill returns the template's pattern for a verified identity: subject
// and its claims (as verified; a claim is filled from a string, a
// number or a boolean). A value that is missing or empty, or that holds
// '*' or '?' (a pattern reads them as a glob, which would widen the
// subscription to other identities' events), is an error naming it.
func (e *EventTemplate) Fill(subject string, claims map[string]any) (pattern.Pattern, error) {
	vals := make([]string, len(e.claims))
	idx := make([]int, len(e.claims))
	for i, claim := range e.claims {
		idx[i] = i
		v, name := subject, identSubject
		if claim != "" {
			name = identClaimPrefix + claim
			s, ok := ClaimString(claims[claim])
			if !ok {
				return pattern.Pattern{}, fmt.Errorf("{%s} has no value: the token has no claim %s that is a string, a number or a boolean", name, strconv.Quote(claim))
			}
			v = s
		}
		switch {
		case v == "":
			return pattern.Pattern{}, fmt.Errorf("{%s} is empty", name)
		case strings.ContainsAny(v, "*?"):
			return pattern.Pattern{}, fmt.Errorf("{%s} holds '*' or '?', which a pattern reads as a glob", name)
		}
		vals[i] = v
	}
	p, err := pattern.Parse(e.t.fill(vals, idx))
	if err != nil {
		return pattern.Pattern{}, fmt.Errorf("the filled template is not a pattern: %v", err)
	}
	return p, nil
}

// ClaimString returns a claim's value as an event template fills it: a
// string as it is, a number in its shortest form (integers without an
// exponent), a boolean as true or false; anything else is false.
func ClaimString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatInt(int64(x), 10), true
		}
		return strconv.FormatFloat(x, 'g', -1, 64), true
	case json.Number:
		return x.String(), true
	case int:
		return strconv.Itoa(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	}
	return "", false
}

// Covers reports whether every event p matches is also one entry
// matches, so a subscription of p hears nothing entry does not allow:
// p holds every pair of entry, with the same value, or with a value
// without globs that entry's glob value matches. A p that lacks a key
// of entry, or gives it another value, is wider or elsewhere.
func Covers(entry, p pattern.Pattern) bool {
	for _, ep := range entry.Pairs() {
		v, ok := p.Get(ep.Key)
		switch {
		case !ok:
			return false
		case v == ep.Value:
		case !strings.ContainsAny(v, "*?") && globMatch(ep.Value, v):
		default:
			return false
		}
	}
	return true
}

// globMatch reports whether s matches glob: '*' any run of bytes, '?'
// one character, as patterns match values.
func globMatch(glob, s string) bool {
	if !strings.ContainsAny(glob, "*?") {
		return glob == s
	}
	g, rest := []rune(glob), []rune(s)
	// star is the glob position after the last '*' and the input
	// position it was tried at: on a mismatch that star takes one more
	// character.
	star, at := -1, 0
	gi, si := 0, 0
	for si < len(rest) {
		switch {
		case gi < len(g) && g[gi] == '*':
			star, at = gi+1, si
			gi++
		case gi < len(g) && (g[gi] == '?' || g[gi] == rest[si]):
			gi++
			si++
		case star >= 0:
			at++
			gi, si = star, at
		default:
			return false
		}
	}
	for gi < len(g) && g[gi] == '*' {
		gi++
	}
	return gi == len(g)
}
