package config

import (
	"fmt"
	"strconv"
	"strings"
)

// relation is how two segments, or two templates, compare: what paths
// they match.
type relation int

const (
	disjoint relation = iota // nothing matches both
	same                     // they match the same texts
	narrower                 // the first matches a subset of what the second does
	wider                    // the first matches a superset
	overlap                  // some text matches both, neither holds the other
)

// segmentRelation compares two segments: literals by text, a literal
// and a segment with variables by matching, and two segments with
// variables by their literal text (equal: same; a bare variable holds any
// other; literal starts or ends that cannot agree: disjoint). What is
// not simply stated is an overlap, and refused.
func segmentRelation(a, b *segment) relation {
	switch {
	case a.literal() && b.literal():
		if a.lits[0] == b.lits[0] {
			return same
		}
		return disjoint
	case a.literal():
		if _, ok := matchSegment(b, a.lits[0], nil); ok {
			return narrower
		}
		return disjoint
	case b.literal():
		if _, ok := matchSegment(a, b.lits[0], nil); ok {
			return wider
		}
		return disjoint
	}
	if len(a.lits) == len(b.lits) && strings.Join(a.lits, "\x00") == strings.Join(b.lits, "\x00") {
		return same
	}
	ap, bp := a.lits[0], b.lits[0]
	as, bs := a.lits[len(a.lits)-1], b.lits[len(b.lits)-1]
	if !strings.HasPrefix(ap, bp) && !strings.HasPrefix(bp, ap) || !strings.HasSuffix(as, bs) && !strings.HasSuffix(bs, as) {
		return disjoint
	}
	switch {
	case b.bare():
		return narrower
	case a.bare():
		return wider
	}
	return overlap
}

// conflict describes how two templates of the same length compare: the
// relation, and for a crossing, a segment where each is the narrower.
type conflict struct {
	rel       relation
	aAt, bAt  int // segments where a, and b, are the narrower (crossing)
	overlapAt int // a segment that overlaps
	crossing  bool
}

func compareTemplates(a, b *pathTemplate) conflict {
	if len(a.segs) != len(b.segs) {
		return conflict{rel: disjoint}
	}
	c := conflict{rel: same, aAt: -1, bAt: -1, overlapAt: -1}
	for i := range a.segs {
		switch segmentRelation(&a.segs[i], &b.segs[i]) {
		case disjoint:
			return conflict{rel: disjoint}
		case narrower:
			if c.aAt < 0 {
				c.aAt = i
			}
		case wider:
			if c.bAt < 0 {
				c.bAt = i
			}
		case overlap:
			if c.overlapAt < 0 {
				c.overlapAt = i
			}
		}
	}
	switch {
	case c.overlapAt >= 0:
		c.rel = overlap
	case c.aAt >= 0 && c.bAt >= 0:
		c.rel, c.crossing = overlap, true
	case c.aAt >= 0:
		c.rel = narrower
	case c.bAt >= 0:
		c.rel = wider
	}
	return c
}

// conflicts refuses two routes that share a method and can match the
// same path with neither more specific than the other (see the package
// doc's # Precedence), at the later route's path.
func (v *validator) conflicts() {
	byLen := make(map[int][]int)
	for i, r := range v.c.Routes {
		if r != nil && r.path != nil {
			byLen[len(r.path.segs)] = append(byLen[len(r.path.segs)], i)
		}
	}
	for _, group := range byLen {
		for x, i := range group {
			for _, j := range group[:x] {
				a, b := v.c.Routes[i], v.c.Routes[j] // a comes after b
				m := sharedMethod(a, b)
				if m == "" {
					continue
				}
				c := compareTemplates(a.path, b.path)
				if c.rel != same && c.rel != overlap {
					continue
				}
				where := "routes[" + strconv.Itoa(i) + "].path"
				v.add(a.at("path"), where, "%s", describeConflict(m, a, b, c))
			}
		}
	}
}

func sharedMethod(a, b *Route) string {
	for _, m := range a.Methods {
		for _, n := range b.Methods {
			if m == n {
				return m
			}
		}
	}
	return ""
}

func describeConflict(method string, a, b *Route, c conflict) string {
	other := routeRef(b)
	if c.rel == same {
		return fmt.Sprintf("%s %s and %s, %s %s, match the same paths", method, a.Path, other, method, b.Path)
	}
	s := fmt.Sprintf("%s %s conflicts with %s, %s %s: both match ", method, a.Path, other, method, b.Path)
	if w, ok := witness(a.path, b.path); ok {
		s += w
	} else {
		s += "some paths"
	}
	s += ", and neither is more specific"
	if c.crossing {
		return s + fmt.Sprintf(" (segment %d is more specific in %s, segment %d in %s)", c.aAt+1, a.Path, c.bAt+1, b.Path)
	}
	sa, sb := &a.path.segs[c.overlapAt], &b.path.segs[c.overlapAt]
	return s + fmt.Sprintf(" (segments %s and %s overlap)", sa.format(a.path.vars), sb.format(b.path.vars))
}

// witness builds a path both templates match, for a conflict's message.
func witness(a, b *pathTemplate) (string, bool) {
	var w strings.Builder
	for i := range a.segs {
		s, ok := segmentWitness(&a.segs[i], &b.segs[i])
		if !ok {
			return "", false
		}
		w.WriteString("/" + s)
	}
	return w.String(), true
}

// segmentWitness finds a text both segments match among a few
// candidates: each filled with a letter neither uses, and the two's
// literal ends around such a letter.
func segmentWitness(a, b *segment) (string, bool) {
	fill := "x"
	for _, c := range "xyzqvw" {
		if !strings.ContainsRune(strings.Join(a.lits, "")+strings.Join(b.lits, ""), c) {
			fill = string(c)
			break
		}
	}
	ap, bp := a.lits[0], b.lits[0]
	as, bs := a.lits[len(a.lits)-1], b.lits[len(b.lits)-1]
	prefix, suffix := longer(ap, bp), longer(as, bs)
	candidates := []string{filled(a, fill), filled(b, fill), prefix + fill + suffix}
	if !a.literal() && !b.literal() {
		mid := func(s *segment) string { return strings.Join(s.lits[1:len(s.lits)-1], fill) }
		candidates = append(candidates, prefix+fill+mid(a)+fill+mid(b)+fill+suffix)
	}
	for _, c := range candidates {
		if _, ok := matchSegment(a, c, nil); !ok {
			continue
		}
		if _, ok := matchSegment(b, c, nil); ok {
			return c, true
		}
	}
	return "", false
}

func longer(a, b string) string {
	if len(a) > len(b) {
		return a
	}
	return b
}

// filled writes seg with each variable replaced by fill.
func filled(seg *segment, fill string) string {
	return strings.Join(seg.lits, fill)
}

// routeRef names a route in a problem: by its name when the file gave
// one, and by its line.
func routeRef(r *Route) string {
	if r.has("name") {
		return fmt.Sprintf("route %s (line %d)", strconv.Quote(r.Name), r.start.line)
	}
	return fmt.Sprintf("the route at line %d", r.start.line)
}
