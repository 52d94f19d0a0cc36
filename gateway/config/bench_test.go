package config

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// benchRoutes is a table of 50 routes: ten services of five routes each.
func benchRoutes() string {
	var b strings.Builder
	b.WriteString("routes:\n")
	for i := range 10 {
		fmt.Fprintf(&b, `  - {method: POST, path: "/api/svc%d/{action}", pattern: "role:svc%d,cmd:{action}", vars: {action: {allow: [create, update, delete]}}}
  - {method: GET, path: "/api/svc%d/items/{id}", pattern: "role:svc%d,cmd:get", vars: {id: {regex: "[0-9]+"}}}
  - {method: GET, path: "/api/svc%d/items/{id}/history", pattern: "role:svc%d,cmd:history"}
  - {method: PUT, path: "/shop%d/{kind}-items/{id}.json", pattern: "role:svc%d,kind:{kind},cmd:put_v2", vars: {kind: {allow: "*"}}}
  - {method: [GET, HEAD], path: "/api/svc%d/status", pattern: "role:svc%d,cmd:status"}
`, i, i, i, i, i, i, i, i, i, i)
	}
	return b.String()
}

// BenchmarkMatch measures Table.Match on a table of 50 routes, the
// gateway's hot path.
func BenchmarkMatch(b *testing.B) {
	table := mustParse(b, benchRoutes()).Table()
	for _, bc := range []struct{ name, method, path string }{
		{"literal", "GET", "/api/svc7/status"},
		{"variable", "GET", "/api/svc7/items/12345"},
		{"deep", "GET", "/api/svc7/items/12345/history"},
		{"fill_pattern", "POST", "/api/svc7/update"},
		{"in_segment", "PUT", "/shop7/shoe-items/a1b2.json"},
		{"escaped", "GET", "/api/svc7/items/%31%32"},
		{"not_found", "GET", "/api/nope/x"},
		{"not_allowed", "DELETE", "/api/svc7/status"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				table.Match(bc.method, bc.path)
			}
		})
	}
}

// BenchmarkMessage measures building a call's message from path
// variables, a query and a small JSON body.
func BenchmarkMessage(b *testing.B) {
	table := mustParse(b, benchRoutes()).Table()
	m, err := table.Match("POST", "/api/svc7/update")
	if err != nil {
		b.Fatal(err)
	}
	q := url.Values{"trace": {"1"}}
	body := []byte(`{"id": 42, "name": "shoe", "tags": ["a", "b"]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Message(q, body); err != nil {
			b.Fatal(err)
		}
	}
}
