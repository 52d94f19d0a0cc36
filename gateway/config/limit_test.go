package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestParseLimits checks that hostile files end quickly with a clear
// problem: merge keys that expand exponentially, brackets nested deep
// (which the YAML parser takes quadratic time on), a file too large, and
// a file with more problems than are reported.
func TestParseLimits(t *testing.T) {
	bomb := func() string {
		var b strings.Builder
		b.WriteString("x-m0: &m0 {method: GET}\n")
		for i := 1; i <= 8; i++ {
			fmt.Fprintf(&b, "x-m%d: &m%d {<<: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*m%d, ", i-1), 10), ", "))
		}
		b.WriteString("routes:\n  - {<<: *m8, path: /a, pattern: \"role:a\"}\n")
		return b.String()
	}
	deep := "routes:\n  - vars: {x: {allow: " + strings.Repeat("[", 100_000) + "a" + strings.Repeat("]", 100_000) + "}}\n"
	many := "routes:\n" + strings.Repeat("  - {}\n", 150)
	for _, tc := range []struct {
		name string
		src  string
		want []string
	}{
		{"merge bomb", bomb(), []string{
			"gateway.yaml:2:16: routes[0]: too large: more than 1000000 values with aliases expanded, or nested deeper than 32",
		}},
		{"deep nesting", deep, []string{
			"gateway.yaml:2:85: brackets nest deeper than 64",
		}},
		{"file too large", "routes: []\n" + strings.Repeat("#", MaxFileSize), []string{
			"gateway.yaml: the file is 262155 bytes; the limit is 262144",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("gateway.yaml", []byte(tc.src))
			if err == nil {
				t.Fatal("no problem")
			}
			// The limit's problem is there; what follows from it (a
			// route left without its keys) may be there too.
			if got := strings.Split(err.Error(), "\n"); !slices.Contains(got, tc.want[0]) {
				t.Errorf("problems:\n%s\nwant among them:\n%s", err, tc.want[0])
			}
		})
	}
	t.Run("problems capped", func(t *testing.T) {
		_, err := Parse("gateway.yaml", []byte(many))
		got := strings.Split(err.Error(), "\n")
		if len(got) != maxProblems+1 {
			t.Fatalf("%d lines, want %d", len(got), maxProblems+1)
		}
		if want := "gateway.yaml: 350 more problems not shown"; got[maxProblems] != want {
			t.Errorf("last line %q, want %q", got[maxProblems], want)
		}
	})
}
