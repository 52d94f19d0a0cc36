package config

import (
	"net/url"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/wizardmesh/wizard/runtime/pattern"
)

// FuzzParse checks that decoding and validation never panic, that they
// are deterministic, and that a file they accept gives a table whose
// every route matches its own path filled in.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("testdata/gateway.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		string(example), matchRoutes, messageRoutes, "", "routes: []", "a: [", "- 1",
		"x-a: &a {method: GET}\nroutes:\n  - {<<: *a, path: /a, pattern: \"role:a\"}\n",
		"routes:\n  - {method: GET, path: \"/f/{a}-{b}\", pattern: \"r:{a}\", vars: {a: {regex: \"x+\"}}}\n",
		"routes:\n  - *x\n", "? [a]\n: 1\n", "routes: !!map {}\n", "routes:\n  - method: |\n      GET\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("f.yaml", data)
		_, err2 := Parse("f.yaml", data)
		if (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() {
			t.Fatalf("two parses differ:\n%v\n%v", err, err2)
		}
		if err != nil {
			for line := range strings.SplitSeq(err.Error(), "\n") {
				if !strings.HasPrefix(line, "f.yaml") {
					t.Fatalf("problem line without the file: %q", line)
				}
			}
			return
		}
		for _, r := range c.Routes {
			path := r.path.fillWith("v")
			if strings.ContainsAny(strings.Join(r.path.litsText(), ""), "v") {
				continue // the fill could end a variable early
			}
			m, err := c.Table().Match(r.Methods[0], path)
			if err != nil {
				if re, ok := err.(*RequestError); ok && re.Status == 404 && re.Field != "" {
					continue // a constraint refused "v"
				}
				if re, ok := err.(*RequestError); ok && re.Status == 400 {
					continue // a literal "." after filling, say
				}
				t.Fatalf("route %q does not match its own path %q: %v", r.Name, path, err)
			}
			if _, err := pattern.Parse(m.Pattern); err != nil {
				t.Fatalf("route %q: pattern %q: %v", r.Name, m.Pattern, err)
			}
		}
	})
}

// fillWith writes the template with every variable replaced by v.
func (t *pathTemplate) fillWith(v string) string {
	if len(t.segs) == 0 {
		return "/"
	}
	var b strings.Builder
	for i := range t.segs {
		b.WriteString("/" + strings.Join(t.segs[i].lits, v))
	}
	return b.String()
}

// litsText returns the template's literal text.
func (t *pathTemplate) litsText() []string {
	var l []string
	for _, s := range t.segs {
		l = append(l, s.lits...)
	}
	return l
}

// FuzzTemplate checks the path and pattern template parsers: no panics;
// an accepted path template writes back to itself and matches itself
// filled in, giving the fill back; an accepted pattern template, filled
// with any value, is a pattern that parses back to that value.
func FuzzTemplate(f *testing.F) {
	for _, s := range []struct{ path, pattern, value string }{
		{"/api/users/{action}", "role:users,cmd:{action}", "create"},
		{"/api/{kind}-items/{id}.json", "role:items,kind:{kind},id:\"{id}\"", "a,b"},
		{"/files/{name}.{ext}", "cmd:{name}_v2,ext:{ext}", "null"},
		{"/", "a:1", ""},
		{"/a/{x}{y}", "a:{x}{y}", "1.0"},
		{"/a/{x", "a:{", `"`},
		{"/é/{x}", "a: {x} ", " "},
	} {
		f.Add(s.path, s.pattern, s.value)
	}
	f.Fuzz(func(t *testing.T, path, pat, value string) {
		if pt, err := parsePath(path); err == nil {
			var b strings.Builder
			for i := range pt.segs {
				b.WriteString("/" + pt.segs[i].format(pt.vars))
			}
			if back := b.String(); back != path && !(path == "/" && back == "") {
				t.Fatalf("path %q written back as %q", path, back)
			}
			fill := "\x00"
			vals, ok := matchFilled(pt, fill)
			if !ok {
				t.Fatalf("path %q does not match itself filled with %q", path, fill)
			}
			for i, v := range vals {
				if v != fill {
					t.Fatalf("path %q: {%s} = %q, want %q", path, pt.vars[i], v, fill)
				}
			}
		}
		pt, err := parsePattern(pat)
		if err != nil {
			return
		}
		vals := make([]string, len(pt.vars))
		idx := make([]int, len(pt.vars))
		for i := range vals {
			vals[i], idx[i] = value, i
		}
		filled := pt.fill(vals, idx)
		p, err := pattern.Parse(filled)
		if err != nil {
			t.Fatalf("pattern %q filled with %q: %q does not parse: %v", pat, value, filled, err)
		}
		for _, pp := range pt.pairs {
			if len(pp.vars) == 0 {
				continue
			}
			want := strings.Join(pp.lits, value)
			if got, _ := p.Get(pp.key); got != want {
				t.Fatalf("pattern %q filled with %q: %s holds %q, want %q (%s)", pat, value, pp.key, got, want, filled)
			}
		}
	})
}

// matchFilled matches the template filled with fill, segment by segment.
func matchFilled(pt *pathTemplate, fill string) ([]string, bool) {
	var vals []string
	for i := range pt.segs {
		s := &pt.segs[i]
		var ok bool
		if vals, ok = matchSegment(s, strings.Join(s.lits, fill), vals); !ok {
			return nil, false
		}
	}
	return vals, true
}

// FuzzMatch checks matching and message building on any request: no
// panics, and a match's variables and pattern are sound.
func FuzzMatch(f *testing.F) {
	table := mustParse(f, matchRoutes).Table()
	f.Add("GET", "/api/users/me", "a=1", []byte(`{"b":2}`))
	f.Add("PUT", "/api/widget-items/a%2Fb.json", "x=1&x=2", []byte(`[1]`))
	f.Add("GET", "/q/%FF", "", []byte(`{`))
	f.Add("POST", "/api/users/create/", "cmd=x", []byte(`{"cmd":1}`))
	f.Fuzz(func(t *testing.T, method, path, query string, body []byte) {
		m, err := table.Match(method, path)
		if err != nil {
			if _, ok := err.(*RequestError); !ok {
				t.Fatalf("error %T", err)
			}
			return
		}
		for k, v := range m.Vars() {
			if v == "" || !utf8.ValidString(v) {
				t.Fatalf("{%s} = %q", k, v)
			}
		}
		if _, err := pattern.Parse(m.Pattern); err != nil {
			t.Fatalf("pattern %q: %v", m.Pattern, err)
		}
		q, _ := url.ParseQuery(query)
		msg, err := m.Message(q, body)
		if err != nil {
			if _, ok := err.(*RequestError); !ok {
				t.Fatalf("error %T", err)
			}
			return
		}
		for k := range msg {
			if m.refuse(k) != "" && m.Route.path.varIndex(k) < 0 && k != m.Route.Body {
				t.Fatalf("message holds refused field %q", k)
			}
		}
	})
}

// FuzzEventTemplate checks the event template parser and its filling:
// no panics; an accepted template filled with a subject (and a claim) is
// a pattern its own filling covers, and one filled for another subject
// is never covered by it: a user's subscription cannot reach another
// user's events.
func FuzzEventTemplate(f *testing.F) {
	for _, s := range []struct{ tmpl, a, b string }{
		{"role:match,event:found,user:{auth.subject}", "42", "43"},
		{"team:t-{auth.claims.team},user:{auth.subject}", "ada", "ada "},
		{"role:news", "a", "b"},
		{"user:{auth.subject", "a", "b"},
		{"user:{auth.claims.}", "a", "b"},
		{`user:"{auth.subject}"`, "a,b", "a"},
		{"u:{auth.subject}x,v:{auth.subject}", "1", "1.0"},
	} {
		f.Add(s.tmpl, s.a, s.b)
	}
	f.Fuzz(func(t *testing.T, tmpl, a, b string) {
		e, err := parseEvent(tmpl)
		if err != nil {
			return
		}
		claims := func(v string) map[string]any {
			m := map[string]any{}
			for _, c := range e.Claims() {
				m[c] = v
			}
			return m
		}
		pa, errA := e.Fill(a, claims(a))
		pb, errB := e.Fill(b, claims(b))
		if errA != nil {
			return
		}
		if !Covers(pa, pa) {
			t.Fatalf("%q filled with %q: %s does not cover itself", tmpl, a, pa)
		}
		if errB != nil || !e.UsesIdentity() || a == b {
			return
		}
		if pa.String() != pb.String() && Covers(pa, pb) {
			t.Fatalf("%q: filled for %q (%s) covers it filled for %q (%s)", tmpl, a, pa, b, pb)
		}
	})
}
