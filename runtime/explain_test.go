package runtime_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// TestExplainPrecedence explains DESIGN §2's precedence examples, a glob
// case and patrun's greedy walk: the winner, the losers in order, the rule
// each lost by.
func TestExplainPrecedence(t *testing.T) {
	type cand struct {
		Pattern string
		Rank    int
		Rule    pattern.Rule
		Key     string
	}
	tests := []struct {
		name     string
		patterns []string
		msg      string
		want     []cand
	}{
		{"deeper", []string{"a:1", "a:1,b:1"}, "a:1,b:1", []cand{{"a:1,b:1", 1, "", ""}, {"a:1", 2, pattern.RuleDeeper, ""}}},
		{"shallow", []string{"a:1", "a:1,b:1"}, "a:1,b:2", []cand{{"a:1", 1, "", ""}}},
		{"first key", []string{"a:0", "b:1", "c:2"}, "b:1,c:2", []cand{{"b:1", 1, "", ""}, {"c:2", 2, pattern.RuleKeyOrder, "b"}}},
		{"other branch", []string{"a:1,b:2", "a:1,c:3"}, "a:1,b:9,c:3", []cand{{"a:1,c:3", 1, "", ""}}},
		{"missing key", []string{"x:1,y:2,z:3", "y:2"}, "x:1,y:2", []cand{{"y:2", 1, "", ""}}},
		{"glob", []string{"role:x,cmd:*", "role:x,cmd:get"}, "role:x,cmd:get", []cand{{"cmd:get,role:x", 1, "", ""}, {"cmd:*,role:x", 2, pattern.RuleExact, "cmd"}}},
		{"glob wins", []string{"role:x,cmd:*", "role:x,cmd:get"}, "role:x,cmd:put", []cand{{"cmd:*,role:x", 1, "", ""}}},
		{"exact over glob", []string{"a:1", "a:*,b:2"}, "a:1,b:2", []cand{{"a:1", 1, "", ""}, {"a:*,b:2", 2, pattern.RuleExact, "a"}}},
		{"glob order", []string{"a:x*", "a:*"}, "a:xy", []cand{{"a:x*", 1, "", ""}, {"a:*", 2, pattern.RuleGlobOrder, "a"}}},
		{"kept earlier", []string{"a:1", "a:1,b:1,c:1", "a:1,d:1"}, "a:1,b:1,d:1", []cand{{"a:1", 1, "", ""}, {"a:1,d:1", 2, pattern.RuleKept, "b"}}},
		{"more specific", []string{"role:x", "role:x,cmd:get"}, "role:x,cmd:get", []cand{{"cmd:get,role:x", 1, "", ""}, {"role:x", 2, pattern.RuleDeeper, ""}}},
		{"catch-all", []string{"", "a:1"}, "a:1", []cand{{"a:1", 1, "", ""}, {"", 2, pattern.RuleDeeper, ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := runtime.New()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n.Close() })
			for _, p := range tt.patterns {
				if err := n.Add(p, func(context.Context, runtime.Request) (any, error) { return nil, nil }); err != nil {
					t.Fatal(err)
				}
			}
			x, err := n.Explain(tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			var got []cand
			for _, c := range x.Candidates {
				got = append(got, cand{c.Pattern.String(), c.Rank, c.Rule, c.Key})
				if c.Rank > 1 && c.Reason == "" {
					t.Errorf("%s lost without a reason", c.Pattern)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("candidates (-want +got):\n%s", diff)
			}
			if !x.Found || !x.Local || x.Refused != nil {
				t.Errorf("Found %v, Local %v, Refused %v; want found, local, not refused", x.Found, x.Local, x.Refused)
			}
		})
	}
}

// TestExplainNotFound: a message nothing matches is refused as not_found.
func TestExplainNotFound(t *testing.T) {
	n, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	x, err := n.Explain("a:1")
	if err != nil {
		t.Fatal(err)
	}
	if x.Found || x.Refused == nil || x.Refused.Code != runtime.CodeNotFound {
		t.Errorf("Found %v, Refused %v; want not found", x.Found, x.Refused)
	}
	if _, err := n.Explain("a:"); err == nil {
		t.Error("Explain(\"a:\"): no error for a malformed pattern")
	}
}
