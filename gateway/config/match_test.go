package config

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// matchRoutes is the table the matching tests use.
const matchRoutes = `
routes:
  - {name: users, method: POST, path: "/api/users/{action}", pattern: "role:users,cmd:{action}",
     vars: {action: {allow: [create, retrieve, update]}}}
  - {name: me, method: GET, path: /api/users/me, pattern: "role:users,cmd:me"}
  - {name: user, method: GET, path: "/api/users/{id}", pattern: "role:users,cmd:get", vars: {id: {regex: "[0-9]+"}}}
  - {name: any, method: GET, path: "/api/{kind}/{id}", pattern: "role:any"}
  - {name: status, method: GET, path: "/api/v{n}/status", pattern: "role:status,v:{n}", vars: {n: {regex: "[0-9]+"}}}
  - {name: search, method: [GET, POST], path: /api/matchmaking/search, pattern: "role:matchmaking,cmd:search"}
  - {name: items, method: PUT, path: "/api/{kind}-items/{id}.json", pattern: "role:items,kind:{kind},cmd:put_v2",
     vars: {kind: {regex: "[a-z]+"}, id: {allow: "*"}}}
  - {name: files, method: GET, path: "/files/{name}.{ext}", pattern: "role:files,name:{name},ext:{ext}",
     vars: {name: {allow: "*"}, ext: {allow: "*"}}}
  - {name: q, method: GET, path: "/q/{v}", pattern: "role:q,v:{v}", vars: {v: {allow: "*"}}}
  - {name: root, method: GET, path: /, pattern: "role:root"}
`

func mustParse(t testing.TB, src string) *Config {
	t.Helper()
	c, err := Parse("gateway.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestMatch checks precedence, variables anywhere in a segment, the
// filled pattern, percent-decoding, trailing slashes and every error.
func TestMatch(t *testing.T) {
	table := mustParse(t, matchRoutes).Table()
	type result struct {
		Route   string
		Vars    map[string]string
		Pattern string
		Status  int
		Message string
		Allow   []string
		Field   string
	}
	for _, tc := range []struct {
		method, path string
		want         result
	}{
		{"POST", "/api/users/create", result{Route: "users", Vars: map[string]string{"action": "create"}, Pattern: "cmd:create,role:users"}},
		// A literal segment beats a variable.
		{"GET", "/api/users/me", result{Route: "me", Vars: map[string]string{}, Pattern: "cmd:me,role:users"}},
		{"GET", "/api/users/42", result{Route: "user", Vars: map[string]string{"id": "42"}, Pattern: "cmd:get,role:users"}},
		{"GET", "/api/orders/7", result{Route: "any", Vars: map[string]string{"kind": "orders", "id": "7"}, Pattern: "role:any"}},
		// Literal text around a variable beats a bare variable.
		{"GET", "/api/v2/status", result{Route: "status", Vars: map[string]string{"n": "2"}, Pattern: "role:status,v:\"2\""}},
		{"GET", "/api/matchmaking/search", result{Route: "search", Vars: map[string]string{}, Pattern: "cmd:search,role:matchmaking"}},
		{"POST", "/api/matchmaking/search", result{Route: "search", Vars: map[string]string{}, Pattern: "cmd:search,role:matchmaking"}},
		{"PUT", "/api/widget-items/x1.json", result{Route: "items", Vars: map[string]string{"kind": "widget", "id": "x1"}, Pattern: "cmd:put_v2,kind:widget,role:items"}},
		// The first '-' ends {kind}; the last ".json" ends {id}.
		{"PUT", "/api/widget-items/a.b.json", result{Route: "items", Vars: map[string]string{"kind": "widget", "id": "a.b"}, Pattern: "cmd:put_v2,kind:widget,role:items"}},
		{"GET", "/files/archive.tar.gz", result{Route: "files", Vars: map[string]string{"name": "archive", "ext": "tar.gz"}, Pattern: "ext:tar.gz,name:archive,role:files"}},
		{"GET", "/", result{Route: "root", Vars: map[string]string{}, Pattern: "role:root"}},
		// Percent-decoding after splitting: %2F stays in the value.
		{"PUT", "/api/widget-items/a%2Fb.json", result{Route: "items", Vars: map[string]string{"kind": "widget", "id": "a/b"}, Pattern: "cmd:put_v2,kind:widget,role:items"}},
		{"GET", "/api/users%2Fme", result{Status: 404, Message: "no route for GET /api/users%2Fme"}},
		{"GET", "/api/%75sers/me", result{Route: "me", Vars: map[string]string{}, Pattern: "cmd:me,role:users"}},
		{"GET", "/q/caf%C3%A9", result{Route: "q", Vars: map[string]string{"v": "café"}, Pattern: `role:q,v:"café"`}},
		// Values that would read as something else are quoted.
		{"GET", "/q/a,b:c", result{Route: "q", Vars: map[string]string{"v": "a,b:c"}, Pattern: `role:q,v:"a,b:c"`}},
		{"GET", "/q/null", result{Route: "q", Vars: map[string]string{"v": "null"}, Pattern: `role:q,v:"null"`}},
		{"GET", "/q/1.0", result{Route: "q", Vars: map[string]string{"v": "1.0"}, Pattern: `role:q,v:"1.0"`}},
		{"GET", `/q/a%22b%5C`, result{Route: "q", Vars: map[string]string{"v": `a"b\`}, Pattern: `role:q,v:"a\"b\\"`}},
		{"GET", "/q/plain_word-1.2", result{Route: "q", Vars: map[string]string{"v": "plain_word-1.2"}, Pattern: "role:q,v:plain_word-1.2"}},
		// Constraints: the most specific template decides.
		{"POST", "/api/users/delete", result{Status: 404, Field: "action", Message: `no route for POST /api/users/delete: "delete" is not an allowed value of {action}`}},
		{"GET", "/api/users/abc", result{Status: 404, Field: "id", Message: `no route for GET /api/users/abc: "abc" is not an allowed value of {id}`}},
		{"GET", "/api/vx/status", result{Status: 404, Field: "n", Message: `no route for GET /api/vx/status: "x" is not an allowed value of {n}`}},
		{"PUT", "/api/Widget-items/x.json", result{Status: 404, Field: "kind", Message: `no route for PUT /api/Widget-items/x.json: "Widget" is not an allowed value of {kind}`}},
		// Other methods: 405 with Allow, constraints aside.
		{"DELETE", "/api/users/me", result{Status: 405, Allow: []string{"GET", "POST"}, Message: "method DELETE is not allowed for /api/users/me; allowed: GET, POST"}},
		{"HEAD", "/api/matchmaking/search", result{Status: 405, Allow: []string{"GET", "POST"}, Message: "method HEAD is not allowed for /api/matchmaking/search; allowed: GET, POST"}},
		{"get", "/", result{Status: 405, Allow: []string{"GET"}, Message: "method get is not allowed for /; allowed: GET"}},
		// No route.
		{"GET", "/nope", result{Status: 404, Message: "no route for GET /nope"}},
		{"GET", "/api//x", result{Status: 404, Message: "no route for GET /api//x"}},
		{"GET", "/API/users/me/x", result{Status: 404, Message: "no route for GET /API/users/me/x"}},
		{"GET", "/api/users/me/", result{Status: 404, Message: "no route for GET /api/users/me/ (routes take no trailing '/')"}},
		{"GET", "/files/.gz", result{Status: 404, Message: "no route for GET /files/.gz"}},
		{"GET", "", result{Status: 404, Message: `no route for path "": a path starts with '/'`}},
		{"GET", "*", result{Status: 404, Message: `no route for path "*": a path starts with '/'`}},
		// Malformed paths.
		{"GET", "/api/users/%zz", result{Status: 400, Message: "bad percent-escape in path /api/users/%zz"}},
		{"GET", "/api/users/%FF", result{Status: 400, Message: `path "/api/users/%FF" is not valid UTF-8`}},
		{"GET", "/api/users/..", result{Status: 400, Message: `path /api/users/.. holds a ".." segment`}},
		{"GET", "/api/%2e/me", result{Status: 400, Message: `path /api/%2e/me holds a "." segment`}},
		{"GET", "/api/users/\xff", result{Status: 400, Message: `path "/api/users/\xff" is not valid UTF-8`}},
		{"GET", "/api/users/me?x=1", result{Status: 400, Message: `path "/api/users/me?x=1" holds '?'; escape it (a query goes apart from the path)`}},
		{"GET", "/api/users/a b", result{Status: 400, Message: `path "/api/users/a b" holds ' '; escape it (a query goes apart from the path)`}},
		{"GET", "/api/users/a\x00", result{Status: 400, Message: `path "/api/users/a\x00" holds '\x00'; escape it (a query goes apart from the path)`}},
		{"GET", "/q/%3F%23%20", result{Route: "q", Vars: map[string]string{"v": "?# "}, Pattern: `role:q,v:"?# "`}},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			m, err := table.Match(tc.method, tc.path)
			var got result
			if err != nil {
				re, ok := err.(*RequestError)
				if !ok {
					t.Fatalf("error %T, want *RequestError", err)
				}
				got = result{Status: re.Status, Message: re.Message, Allow: re.Allow, Field: re.Field}
				if want := map[int]runtime.Code{400: runtime.CodeInvalidArgument, 404: runtime.CodeNotFound, 405: runtime.CodeUnimplemented}[re.Status]; re.Code != want {
					t.Errorf("code %v for status %d, want %v", re.Code, re.Status, want)
				}
			} else {
				got = result{Route: m.Route.Name, Vars: m.Vars(), Pattern: m.Pattern}
				if _, err := pattern.Parse(m.Pattern); err != nil {
					t.Errorf("the pattern does not parse: %v", err)
				}
				for k, v := range got.Vars {
					if gv, ok := m.Var(k); !ok || gv != v {
						t.Errorf("Var(%q) = %q, %v; want %q", k, gv, ok, v)
					}
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Match(%q, %q) (-want +got):\n%s", tc.method, tc.path, diff)
			}
		})
	}
}

// TestMatchClipsEcho checks that a long path is cut in messages.
func TestMatchClipsEcho(t *testing.T) {
	table := mustParse(t, matchRoutes).Table()
	long := "/" + repeat("a", 5000)
	_, err := table.Match("GET", long)
	re := err.(*RequestError)
	if want := "no route for GET /" + repeat("a", maxEcho-1) + "…"; re.Message != want {
		t.Errorf("message of %d bytes, want %d", len(re.Message), len(want))
	}
	if re.Status != http.StatusNotFound {
		t.Errorf("status %d", re.Status)
	}
}

func repeat(s string, n int) string {
	b := make([]byte, 0, len(s)*n)
	for range n {
		b = append(b, s...)
	}
	return string(b)
}

// TestMatchPatternValues checks that a filled pattern parses back to
// the values it was filled with, whatever they hold.
func TestMatchPatternValues(t *testing.T) {
	table := mustParse(t, matchRoutes).Table()
	for _, v := range []string{"a", "null", "true", "1", "-1", "1e3", "007", " a ", "a b", `"`, `\`, ",", ":", "a:b,c:d", "*", "?", "café", "_x", "x$", "\t", "{x}"} {
		m, err := table.Match("GET", "/q/"+escapePath(v))
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		p, err := pattern.Parse(m.Pattern)
		if err != nil {
			t.Fatalf("%q: pattern %s: %v", v, m.Pattern, err)
		}
		if got, _ := p.Get("v"); got != v {
			t.Errorf("value %q: pattern %s holds %q", v, m.Pattern, got)
		}
		if got, _ := p.Get("role"); got != "q" {
			t.Errorf("value %q: pattern %s has role %q", v, m.Pattern, got)
		}
	}
}

// escapePath escapes every byte but letters and digits.
func escapePath(s string) string {
	const hex = "0123456789ABCDEF"
	var b []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	return string(b)
}
