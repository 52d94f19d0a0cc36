package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitLine(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"cmd:sum,role:math values:[1,2]", []string{"cmd:sum,role:math", "values:[1,2]"}},
		{"role:echo,n:1", []string{"role:echo,n:1"}},
		{"role:echo,a:{b:1, c:2}", []string{"role:echo,a:{b:1, c:2}"}},
		{`role:echo,s:"a b"`, []string{`role:echo,s:"a b"`}},
		{"role:x   {\"a\":1}", []string{"role:x", `{"a":1}`}},
		{"role:x,a:{ b:1", []string{"role:x,a:{ b:1"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, splitLine(tt.in)); diff != "" {
			t.Errorf("splitLine(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestSplitFields(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"role:feed", []string{"role:feed"}},
		{"role:feed n:1  {\"n\":2}\tn:[3, 4]", []string{"role:feed", "n:1", `{"n":2}`, "n:[3, 4]"}},
		{`role:echo s:"a b" t:'c d'`, []string{"role:echo", `s:"a b"`, `t:'c d'`}},
		{"role:x a:{ b:1", []string{"role:x", "a:{ b:1"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, splitFields(tt.in)); diff != "" {
			t.Errorf("splitFields(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestCompleter(t *testing.T) {
	m := newTestMesh(t, "tcp", nil)
	j := &repl{n: m.nodes[0]}
	c := completer{j}
	got, n := c.Do([]rune("cmd:pro"), 7)
	if n != 7 || len(got) != 1 || string(got[0]) != "duct" {
		t.Errorf("Do(cmd:pro) = %q, %d; want duct, 7", got, n)
	}
	got, _ = c.Do([]rune(".me"), 3)
	if len(got) != 2 { // .members, .metadata
		t.Errorf("Do(.me) = %q; want two dot commands", got)
	}
}
