package config

import (
	"strings"
	"testing"
)

// TestSegmentRelation checks segmentRelation against brute force: over
// every segment template of up to three parts (literals from "a", "b",
// "-" and variables) and every text of up to six bytes of "ab-", a
// disjoint pair matches no common text, a narrower one matches nothing
// the wider does not, and a same pair matches the same texts. (Overlap
// claims nothing: it is refused.)
func TestSegmentRelation(t *testing.T) {
	var segs []*segment
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		if prefix != "" {
			if pt, err := parsePath("/" + prefix); err == nil && len(pt.segs) == 1 {
				segs = append(segs, &pt.segs[0])
			}
		}
		if n == 0 {
			return
		}
		for _, part := range []string{"a", "b", "-", "ab", "{v" + string(rune('0'+n)) + "}"} {
			gen(prefix+part, n-1)
		}
	}
	gen("", 3)
	var texts []string
	var genText func(s string)
	genText = func(s string) {
		if s != "" {
			texts = append(texts, s)
		}
		if len(s) == 6 {
			return
		}
		for _, c := range []string{"a", "b", "-"} {
			genText(s + c)
		}
	}
	genText("")
	matches := func(s *segment, text string) bool {
		_, ok := matchSegment(s, text, nil)
		return ok
	}
	checked := 0
	seen := map[relation]int{}
	for _, a := range segs {
		for _, b := range segs {
			rel := segmentRelation(a, b)
			seen[rel]++
			for _, text := range texts {
				ma, mb := matches(a, text), matches(b, text)
				bad := rel == disjoint && ma && mb ||
					rel == narrower && ma && !mb ||
					rel == wider && mb && !ma ||
					rel == same && ma != mb
				if bad {
					t.Fatalf("%s vs %s: relation %d, but %q matches the first %v, the second %v",
						a.format(names(a)), b.format(names(b)), rel, text, ma, mb)
				}
			}
			checked++
		}
	}
	if checked < 1000 || len(seen) != 5 {
		t.Fatalf("%d pairs, relations seen %v", checked, seen)
	}
	t.Logf("%d segments, %d texts, %d pairs: %v", len(segs), len(texts), checked, seen)
}

func names(s *segment) []string {
	n := make([]string, 0, len(s.vars))
	for range s.vars {
		n = append(n, "v")
	}
	return n
}

// TestPrecedenceChain checks that among nested routes the most specific
// wins at every depth, whatever the order of the file.
func TestPrecedenceChain(t *testing.T) {
	routes := []string{
		`  - {name: lit, method: GET, path: /a/b/c, pattern: "r:lit"}`,
		`  - {name: shaped, method: GET, path: "/a/b/{x}.json", pattern: "r:shaped"}`,
		`  - {name: var, method: GET, path: "/a/b/{x}", pattern: "r:var"}`,
		`  - {name: var2, method: GET, path: "/a/{y}/{x}", pattern: "r:var2"}`,
		`  - {name: var3, method: GET, path: "/{z}/{y}/{x}", pattern: "r:var3"}`,
	}
	for _, order := range [][]int{{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {2, 4, 0, 3, 1}} {
		var b strings.Builder
		b.WriteString("routes:\n")
		for _, i := range order {
			b.WriteString(routes[i] + "\n")
		}
		table := mustParse(t, b.String()).Table()
		for path, want := range map[string]string{
			"/a/b/c": "lit", "/a/b/c.json": "shaped", "/a/b/d": "var", "/a/x/c": "var2", "/x/b/c": "var3",
		} {
			m, err := table.Match("GET", path)
			if err != nil || m.Route.Name != want {
				t.Errorf("order %v: %s matched %v, %v; want %s", order, path, m, err, want)
			}
		}
	}
}
