package config

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRouteScopes: a route's scopes are OAuth scope-tokens (RFC 6749,
// printable ASCII without spaces, '"' or '\'); each bad one is a problem
// naming the route's scope by index, at its line, and quoting it.
func TestRouteScopes(t *testing.T) {
	good := []string{"read", "orders:read", "https://api.test/orders.read", "!", "~", "a#[]^{}|z"}
	bad := []string{"", " ", "  ", "a b", "\t", "a\vb", "\u00a0", "é", "a\x00", "\x7f", `q"`, `x\y`}
	var b strings.Builder
	b.WriteString("auth:\n  delegate: {pattern: \"role:auth,cmd:check\"}\nroutes:\n  - name: orders\n    method: GET\n    path: /a\n    pattern: \"role:a\"\n    auth: required\n    scopes:\n")
	for _, s := range append(append([]string(nil), good...), bad...) {
		b.WriteString("      - " + strconv.Quote(s) + "\n")
	}
	_, err := Parse("gateway.yaml", []byte(b.String()))
	var want []string
	for i, s := range bad {
		n := len(good) + i
		want = append(want, "gateway.yaml:"+strconv.Itoa(10+n)+":9: routes[0].scopes["+strconv.Itoa(n)+"]: bad scope "+strconv.Quote(s)+`: a scope is printable ASCII without spaces, '"' or '\' (RFC 6749)`)
	}
	var got []string
	if err != nil {
		got = strings.Split(err.Error(), "\n")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}

	c, err := Parse("gateway.yaml", []byte("auth:\n  delegate: {pattern: \"role:auth,cmd:check\"}\nroutes:\n  - {method: GET, path: /a, pattern: \"role:a\", auth: optional, scopes: [\"!\", \"~\", \"orders:read\"]}\n"))
	if err != nil {
		t.Fatalf("good scopes: %v", err)
	}
	if diff := cmp.Diff([]string{"!", "~", "orders:read"}, c.Routes[0].Scopes); diff != "" {
		t.Errorf("scopes (-want +got):\n%s", diff)
	}
}

// TestMatchSegmentShortText: a request segment that ends where a
// non-last variable of the template segment would start matches nothing
// (and does not read past its end).
func TestMatchSegmentShortText(t *testing.T) {
	for _, tc := range []struct{ template, text string }{
		{"pre{a}-{b}", "pre"},
		{"{a}-{b}-{c}", "x-"},
		{"{a}.{b}", ""},
	} {
		pt, err := parsePath("/" + tc.template)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := matchSegment(&pt.segs[0], tc.text, nil); ok {
			t.Errorf("%s matched %q: %q, want no match", tc.template, tc.text, got)
		}
	}
}

// TestVariableNames: a variable name is a letter (either case) or '_',
// then letters, digits or '_'; the characters just outside each range
// are refused at their offset.
func TestVariableNames(t *testing.T) {
	for _, name := range []string{"a", "z", "A", "Z", "_", "userID", "Zone_9", "x0", "AZaz09_"} {
		pt, err := parsePath("/v/{" + name + "}")
		if err != nil {
			t.Errorf("{%s}: %v", name, err)
			continue
		}
		if diff := cmp.Diff([]string{name}, pt.vars); diff != "" {
			t.Errorf("{%s} vars (-want +got):\n%s", name, diff)
		}
		vals, ok := matchSegment(&pt.segs[1], "Val", nil)
		if !ok || len(vals) != 1 || vals[0] != "Val" {
			t.Errorf("{%s} against Val: %q, %v", name, vals, ok)
		}
	}
	for _, tc := range []struct {
		name string
		at   int // offset of the bad character in the name
	}{
		{"0a", 0}, {"9", 0}, {"@", 0}, {"[", 0}, {"`", 0}, {"a-b", 1}, {"A@", 1}, {"Z[", 1}, {"aé", 1},
	} {
		_, err := parsePath("/v/{" + tc.name + "}")
		want := &templateError{"path", "/v/{" + tc.name + "}", 4 + tc.at, "bad variable name " + strconv.Quote(tc.name) + ": a letter or '_', then letters, digits or '_'"}
		if diff := cmp.Diff(error(want), err, cmp.AllowUnexported(templateError{})); diff != "" {
			t.Errorf("{%s} (-want +got):\n%s", tc.name, diff)
		}
	}
}
