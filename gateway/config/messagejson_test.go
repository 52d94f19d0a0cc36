package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// jsonRoutes has a variable that fills a pattern key, one that does not,
// and a body option.
const jsonRoutes = `
routes:
  - {name: users, method: POST, path: "/api/users/{cmd}/{id}", pattern: "role:users,cmd:{cmd}",
     vars: {cmd: {allow: [create, "a<b"]}, id: {regex: ".*"}}}
  - {name: items, method: PUT, path: "/api/items/{id}", pattern: "role:items,cmd:put", body: item}
`

// messageOf is what a handler decodes of the message Message builds, the
// pattern's pairs overlaid.
func messageOf(t testing.TB, m *Match, q url.Values, body []byte) (map[string]any, error) {
	msg, err := m.Message(q, body)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	out := decodeNumbers(t, b)
	for k, v := range patternPairs(t, m) {
		out[k] = v
	}
	return out, nil
}

func patternPairs(t testing.TB, m *Match) map[string]any {
	p, err := pattern.Parse(m.Pattern)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	for _, pr := range p.Pairs() {
		out[pr.Key] = pr.Value
	}
	return out
}

func decodeNumbers(t testing.TB, b []byte) map[string]any {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out map[string]any
	if err := d.Decode(&out); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return out
}

// TestAppendMessageJSON: the JSON message of the common requests is the
// message Message builds with the pattern's pairs, and the rest are left
// to Message (false).
func TestAppendMessageJSON(t *testing.T) {
	table := mustParse(t, jsonRoutes).Table()
	for _, tc := range []struct {
		name, method, path string
		query              url.Values
		body               string
		ok                 bool
	}{
		{"merged", "POST", "/api/users/create/7", url.Values{"a": {"1"}, "tags": {"x", "y"}}, `{"b": 2, "n": 1.50, "o": {"cmd": "x"}, "s": "<\u00e9>"}`, true},
		{"no body", "POST", "/api/users/create/7", nil, "", true},
		{"blank body", "POST", "/api/users/create/7", nil, " \n", true},
		{"empty object", "POST", "/api/users/create/7", nil, "{}", true},
		{"escaping variable", "POST", "/api/users/a%3Cb/%22q%22", nil, `{"x":null}`, true},
		{"body field", "PUT", "/api/items/3", url.Values{"q": {"1"}}, `[1, {"a": 2}]`, true},
		{"pattern key in body", "POST", "/api/users/create/7", nil, `{"cmd": "delete"}`, false},
		{"escaped pattern key in body", "POST", "/api/users/create/7", nil, `{"\u0063md": "delete"}`, false},
		{"variable in body", "POST", "/api/users/create/7", nil, `{"id": 1}`, false},
		{"metadata key", "POST", "/api/users/create/7", nil, `{"k$": 1}`, false},
		{"twice in the body", "POST", "/api/users/create/7", nil, `{"a": 1, "a": 2}`, false},
		{"query and body", "POST", "/api/users/create/7", url.Values{"a": {"1"}}, `{"a": 2}`, false},
		{"array body", "POST", "/api/users/create/7", nil, `[1]`, false},
		{"invalid body", "POST", "/api/users/create/7", nil, `{"a":`, false},
		// More keys than the room kept on the stack for them.
		{"many keys", "POST", "/api/users/create/7", url.Values{"q": {"1"}}, manyKeys(20, ""), true},
		{"many keys, the last twice", "POST", "/api/users/create/7", nil, manyKeys(20, "k19"), false},
		{"many keys, the last in the query too", "POST", "/api/users/create/7", url.Values{"k19": {"1"}}, manyKeys(20, ""), false},
		{"a long key", "POST", "/api/users/create/7", nil, `{"` + strings.Repeat("k", 100) + `": 1}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := table.Match(tc.method, tc.path)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := m.AppendMessageJSON([]byte("x"), tc.query, []byte(tc.body))
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v (%s)", ok, tc.ok, got)
			}
			if !ok {
				if string(got) != "x" {
					t.Errorf("dst became %q", got)
				}
				return
			}
			want, err := messageOf(t, m, tc.query, []byte(tc.body))
			if err != nil {
				t.Fatalf("Message: %v", err)
			}
			if d := cmp.Diff(want, decodeNumbers(t, got[1:])); d != "" {
				t.Errorf("%s (-Message +AppendMessageJSON):\n%s", got[1:], d)
			}
		})
	}
}

// manyKeys is an object of n keys k0…k(n-1), then extra as a key again
// when not "".
func manyKeys(n int, extra string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, "%q: %d,", "k"+strconv.Itoa(i), i)
	}
	if extra != "" {
		fmt.Fprintf(&b, "%q: 0,", extra)
	}
	return strings.TrimSuffix(b.String(), ",") + "}"
}

// FuzzAppendMessageJSON: whatever the body and query, a message
// AppendMessageJSON writes is valid JSON holding what Message builds
// (the pattern's pairs overlaid).
func FuzzAppendMessageJSON(f *testing.F) {
	f.Add("/api/users/create/7", "a=1&a=2&b=%3C", []byte(`{"b": 2, "n": 1.50, "o": {"cmd": "x"}}`))
	f.Add("/api/items/3", "q=1", []byte(`[1, "x"]`))
	f.Add("/api/users/create/7", "", []byte(`{"\u0061": 1, "a\u0000": "\ud800"}`))
	f.Add("/api/users/a<b/x", "", []byte(` {} `))
	table := mustParse(f, jsonRoutes).Table()
	f.Fuzz(func(t *testing.T, path, rawQuery string, body []byte) {
		method := "POST"
		if len(path) > 10 && path[:10] == "/api/items" {
			method = "PUT"
		}
		m, err := table.Match(method, path)
		if err != nil {
			return
		}
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			return
		}
		got, ok := m.AppendMessageJSON(nil, q, body)
		if !ok {
			return
		}
		if !json.Valid(got) {
			t.Fatalf("invalid JSON %q", got)
		}
		want, err := messageOf(t, m, q, body)
		if err != nil {
			t.Fatalf("AppendMessageJSON wrote %s, Message refused: %v", got, err)
		}
		if d := cmp.Diff(want, decodeNumbers(t, got)); d != "" {
			t.Fatalf("%s (-Message +AppendMessageJSON):\n%s", got, d)
		}
	})
}
