package patrun

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// noMatch is the want of a find that matches nothing.
const noMatch = "<no match>"

// newTestRouter runs ops on a new router: "+p" adds p (its value is p's
// canonical string), "-p" removes p; both must succeed.
func newTestRouter(t testing.TB, ops ...string) *Router[string] {
	t.Helper()
	r := NewRouter[string]()
	for _, op := range ops {
		p := MustParse(op[1:])
		switch op[0] {
		case '+':
			if err := r.Add(p, p.String()); err != nil {
				t.Fatalf("Add(%q): %v", p, err)
			}
		case '-':
			if !r.Remove(p) {
				t.Fatalf("Remove(%q) = false", p)
			}
		default:
			t.Fatalf("bad op %q", op)
		}
	}
	return r
}

// found calls find (Router.Find or Router.FindExact) and formats its result
// as the canonical string of the pattern found, or noMatch, checking that
// the value agrees with the pattern.
func found(t testing.TB, find func(map[string]any) (string, Pattern, bool), msg map[string]any) string {
	t.Helper()
	v, p, ok := find(msg)
	if !ok {
		if v != "" || p.String() != "" {
			t.Errorf("no match, but value %q and pattern %q", v, p)
		}
		return noMatch
	}
	if v != p.String() {
		t.Errorf("value %q belongs to pattern %q", v, p)
	}
	return p.String()
}

func TestRouter_Find(t *testing.T) {
	tests := []struct {
		name string
		ops  []string
		msg  map[string]any
		want string
	}{
		// DESIGN §2's examples, verbatim.
		{"design 1: wider", []string{"+a:1", "+a:1,b:1"}, map[string]any{"a": 1, "b": 2}, "a:1"},
		{"design 1: narrower", []string{"+a:1", "+a:1,b:1"}, map[string]any{"a": 1, "b": 1}, "a:1,b:1"},
		{"design 2: first key wins a tie", []string{"+a:0", "+b:1", "+c:2"}, map[string]any{"b": 1, "c": 2}, "b:1"},
		{"design 3: fallback", []string{"+a:1,b:2", "+a:1,c:3"}, map[string]any{"a": 1, "b": 9, "c": 3}, "a:1,c:3"},
		{"design 4: back to a skip", []string{"+x:1,y:2,z:3", "+y:2"}, map[string]any{"x": 1, "y": 2}, "y:2"},
		{"design 5: exact", []string{"+role:x,cmd:*", "+role:x,cmd:get"}, map[string]any{"role": "x", "cmd": "get"}, "cmd:get,role:x"},
		{"design 5: glob", []string{"+role:x,cmd:*", "+role:x,cmd:get"}, map[string]any{"role": "x", "cmd": "put"}, "cmd:*,role:x"},
		{"design 6: exact beats glob", []string{"+a:1", "+a:*,b:2"}, map[string]any{"a": 1, "b": 2}, "a:1"},

		// Ties go to the key first in byte order.
		{"tie, added in reverse", []string{"+c:2", "+b:1", "+a:0"}, map[string]any{"b": 1, "c": 2}, "b:1"},
		{"tie, all three", []string{"+a:0", "+b:1", "+c:2"}, map[string]any{"a": 0, "b": 1, "c": 2}, "a:0"},
		{"tie, upper case first", []string{"+a:1", "+B:1"}, map[string]any{"a": 1, "B": 1}, "B:1"},
		{"tie, prefix key first", []string{"+ab:1", "+a:1"}, map[string]any{"a": 1, "ab": 1}, "a:1"},
		{"tie, not by length", []string{"+a:1", "+b:1,c:1"}, map[string]any{"a": 1, "b": 1, "c": 1}, "a:1"},

		// Fallback to the wider pattern.
		{"wider when the narrower fails", []string{"+a:1", "+a:1,b:1,c:1"}, map[string]any{"a": 1, "b": 1, "c": 2}, "a:1"},
		{"deepest on the walk", []string{"+a:1", "+a:1,b:1", "+a:1,b:1,c:1"}, map[string]any{"a": 1, "b": 1, "c": 2}, "a:1,b:1"},
		{"extra keys ignored", []string{"+role:x,cmd:get"}, map[string]any{"role": "x", "cmd": "get", "id": 7}, "cmd:get,role:x"},
		{"missing key fails", []string{"+role:x,cmd:get"}, map[string]any{"role": "x"}, noMatch},
		{"other value fails", []string{"+a:1"}, map[string]any{"a": 2}, noMatch},
		{"empty message", []string{"+a:1"}, map[string]any{}, noMatch},
		{"nil message", []string{"+a:1"}, nil, noMatch},
		{"empty router", nil, map[string]any{"a": 1}, noMatch},

		// Back to a skipped branch only while nothing has matched.
		{"back while nothing matched", []string{"+a:1,b:1", "+b:2"}, map[string]any{"a": 1, "b": 2}, "b:2"},
		{"back through two skips", []string{"+a:1,b:1,c:1", "+b:1,c:2", "+c:3"}, map[string]any{"a": 1, "b": 1, "c": 3}, "c:3"},
		{"no going back once found", []string{"+a:1", "+b:1,c:1"}, map[string]any{"a": 1, "b": 1, "c": 1}, "a:1"},
		{"no going back once found, deeper", []string{"+a:1", "+a:1,b:1,c:9", "+b:1,c:1"}, map[string]any{"a": 1, "b": 1, "c": 1}, "a:1"},
		{"back only to the nearest skip", []string{"+a:1,b:1,c:9", "+a:1,c:1", "+b:1"}, map[string]any{"a": 1, "b": 1, "c": 1}, "a:1,c:1"},
		{"catch-all stops going back", []string{"+", "+x:1,y:2,z:3", "+y:2"}, map[string]any{"x": 1, "y": 2}, ""},
		{"catch-all added last stops going back", []string{"+x:1,y:2,z:3", "+y:2", "+"}, map[string]any{"x": 1, "y": 2}, ""},
		{"catch-all does not hide a deeper match", []string{"+", "+a:1", "+a:1,b:1"}, map[string]any{"a": 1, "b": 1}, "a:1,b:1"},
		{"catch-all does not hide a skip match", []string{"+", "+a:1", "+b:1"}, map[string]any{"b": 1}, "b:1"},

		// Globs.
		{"exact beats glob at the same key", []string{"+a:*", "+a:1"}, map[string]any{"a": 1}, "a:1"},
		{"exact beats an earlier glob", []string{"+a:1*", "+a:12"}, map[string]any{"a": 12}, "a:12"},
		{"globs in the order added", []string{"+a:*", "+a:1*"}, map[string]any{"a": 12}, "a:*"},
		{"globs in the order added, reversed", []string{"+a:1*", "+a:*"}, map[string]any{"a": 12}, "a:1*"},
		{"later glob when the first fails", []string{"+a:2*", "+a:1*", "+a:*"}, map[string]any{"a": 12}, "a:1*"},
		{"first matching glob only", []string{"+a:*,b:1", "+a:1*"}, map[string]any{"a": 12, "b": 2}, noMatch},
		{"glob shared by two patterns", []string{"+a:*,b:1", "+a:1*", "+a:*"}, map[string]any{"a": 12, "b": 2}, "a:*"},
		{"question mark", []string{"+a:x?"}, map[string]any{"a": "x1"}, "a:x?"},
		{"question mark is one character", []string{"+a:x?"}, map[string]any{"a": "x12"}, noMatch},
		{"question mark is a rune", []string{"+a:?"}, map[string]any{"a": "é"}, "a:?"},
		{"star matches empty", []string{"+a:*"}, map[string]any{"a": ""}, "a:*"},
		{"star matches a number", []string{"+a:1*"}, map[string]any{"a": 1.5}, "a:1*"},
		{"star matches a boolean", []string{"+a:t*"}, map[string]any{"a": true}, "a:t*"},
		{"star never matches a missing key", []string{"+a:*"}, map[string]any{"b": 1}, noMatch},
		{"star never matches nil", []string{"+a:*"}, map[string]any{"a": nil}, noMatch},
		{"star never matches a nested map", []string{"+a:*"}, map[string]any{"a": map[string]any{"b": 1}}, noMatch},
		{"star never matches a list", []string{"+a:*"}, map[string]any{"a": []any{1}}, noMatch},
		{"glob then exact below", []string{"+role:*,cmd:get", "+role:*"}, map[string]any{"role": "y", "cmd": "get"}, "cmd:get,role:*"},
		{"glob falls back to wider", []string{"+role:*,cmd:get", "+role:*"}, map[string]any{"role": "y", "cmd": "put"}, "role:*"},
		{"glob value in message is literal", []string{"+a:1"}, map[string]any{"a": "*"}, noMatch},
		{"exact pattern holding a star", []string{"+a:*"}, map[string]any{"a": "*"}, "a:*"},

		// The catch-all.
		{"catch-all alone, empty message", []string{"+"}, map[string]any{}, ""},
		{"catch-all alone, any message", []string{"+"}, map[string]any{"z": 9}, ""},
		{"catch-all when nothing else matches", []string{"+", "+a:1"}, map[string]any{"a": 2}, ""},
		{"catch-all loses to a match", []string{"+", "+a:1"}, map[string]any{"a": 1}, "a:1"},
		{"catch-all on a dead end", []string{"+", "+a:1,b:1"}, map[string]any{"a": 1}, ""},

		// Values of any scalar type compare as strings.
		{"int matches 1", []string{"+a:1"}, map[string]any{"a": 1}, "a:1"},
		{"float 1.0 matches 1", []string{"+a:1"}, map[string]any{"a": 1.0}, "a:1"},
		{"string matches 1", []string{"+a:1"}, map[string]any{"a": "1"}, "a:1"},
		{"uint8 matches 1", []string{"+a:1"}, map[string]any{"a": uint8(1)}, "a:1"},
		{"json.Number matches 1", []string{"+a:1"}, map[string]any{"a": json.Number("1.0")}, "a:1"},
		{"pattern 1.0 matches int", []string{"+a:1.0"}, map[string]any{"a": 1}, "a:1"},
		{"string 1.0 does not match 1", []string{"+a:1"}, map[string]any{"a": "1.0"}, noMatch},
		{"quoted 1.0 matches the string", []string{`+a:"1.0"`}, map[string]any{"a": "1.0"}, `a:"1.0"`},
		{"quoted 1.0 does not match the number", []string{`+a:"1.0"`}, map[string]any{"a": 1.0}, noMatch},
		{"float matches", []string{"+a:1.5"}, map[string]any{"a": 1.5}, "a:1.5"},
		{"float32 matches", []string{"+a:0.1"}, map[string]any{"a": float32(0.1)}, "a:0.1"},
		{"bool matches true", []string{"+a:true"}, map[string]any{"a": true}, "a:true"},
		{"string matches true", []string{"+a:true"}, map[string]any{"a": "true"}, "a:true"},
		{"bool false", []string{"+a:true", "+a:false"}, map[string]any{"a": false}, "a:false"},
		{"bool is not 1", []string{"+a:1"}, map[string]any{"a": true}, noMatch},
		{"negative zero", []string{"+a:0"}, map[string]any{"a": -0.0}, "a:0"},
		{"big float", []string{"+a:1e21"}, map[string]any{"a": 1e21}, "a:1e+21"},

		// Only routed keys take part.
		{"meta key ignored", []string{"+a:1"}, map[string]any{"a": 1, "b$": 2}, "a:1"},
		{"meta key never matches", []string{"+a:1", "+a:1,b:2"}, map[string]any{"a": 1, "b$": 2}, "a:1"},
		{"nil drops the key", []string{"+a:1", "+a:1,b:*"}, map[string]any{"a": 1, "b": nil}, "a:1"},
		{"nested map drops the key", []string{"+a:1", "+a:1,b:*"}, map[string]any{"a": 1, "b": map[string]any{}}, "a:1"},
		{"key holding separators", []string{"+a:1,b:2"}, map[string]any{"a:1,b": 2}, noMatch},
		{"key holding separators, catch-all", []string{"+", "+a:1,b:2"}, map[string]any{"a:1,b": "2"}, ""},
		{"value holding separators", []string{"+a:1,b:2"}, map[string]any{"a": "1,b:2"}, noMatch},
		{"long value", []string{"+a:x*"}, map[string]any{"a": "x" + strings.Repeat("y", 1000)}, "a:x*"},
		{"long exact value", []string{"+a:" + strings.Repeat("y", 300)}, map[string]any{"a": strings.Repeat("y", 300)}, "a:" + strings.Repeat("y", 300)},
		{"many keys", []string{"+k05:5,k17:17", "+k05:5"}, manyKeys(20), "k05:5,k17:17"},
		{"many keys, wider", []string{"+k05:5,k17:0", "+k05:5"}, manyKeys(20), "k05:5"},
		{"many keys, glob", []string{"+k00:0,k19:1*"}, manyKeys(20), "k00:0,k19:1*"},

		// Removal: the router answers as one built from the others.
		{"remove narrower", []string{"+a:1", "+a:1,b:1", "-a:1,b:1"}, map[string]any{"a": 1, "b": 1}, "a:1"},
		{"remove wider", []string{"+a:1", "+a:1,b:1", "-a:1"}, map[string]any{"a": 1, "b": 1}, "a:1,b:1"},
		{"remove wider, dead end", []string{"+a:1", "+a:1,b:1", "-a:1"}, map[string]any{"a": 1, "b": 2}, noMatch},
		{"remove middle", []string{"+a:1", "+a:1,b:1", "+a:1,b:1,c:1", "-a:1,b:1"}, map[string]any{"a": 1, "b": 1, "c": 2}, "a:1"},
		{"remove middle keeps narrower", []string{"+a:1", "+a:1,b:1", "+a:1,b:1,c:1", "-a:1,b:1"}, map[string]any{"a": 1, "b": 1, "c": 1}, "a:1,b:1,c:1"},
		{"remove first key's level", []string{"+a:1", "+b:1", "-a:1"}, map[string]any{"a": 1, "b": 1}, "b:1"},
		{"remove skip level", []string{"+a:1", "+b:1", "-b:1"}, map[string]any{"a": 2, "b": 1}, noMatch},
		{"remove then add again", []string{"+a:1", "+b:1", "-a:1", "+a:1"}, map[string]any{"a": 1, "b": 1}, "a:1"},
		{"remove unhides a skip", []string{"+x:1,y:2,z:3", "+x:1,y:2", "+y:2", "-x:1,y:2"}, map[string]any{"x": 1, "y": 2}, "y:2"},
		{"remove catch-all", []string{"+", "+x:1,y:2,z:3", "+y:2", "-"}, map[string]any{"x": 1, "y": 2}, "y:2"},
		{"remove glob", []string{"+a:*", "+a:1*", "-a:*"}, map[string]any{"a": 12}, "a:1*"},
		{"remove and re-add a glob moves it last", []string{"+a:*", "+a:1*", "-a:*", "+a:*"}, map[string]any{"a": 12}, "a:1*"},
		{"glob kept by another pattern keeps its place", []string{"+a:*", "+a:*,b:1", "+a:1*", "-a:*"}, map[string]any{"a": 12, "b": 1}, "a:*,b:1"},
		{"glob order follows the first pattern left", []string{"+a:*,b:1", "+a:?", "+a:*", "-a:*,b:1"}, map[string]any{"a": 1}, "a:?"},
		{"glob order after removing under a skip", []string{"+a:1", "+b:*,c:1", "+b:?", "+b:*", "-b:*,c:1"}, map[string]any{"b": 1}, "b:?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRouter(t, tt.ops...)
			got := found(t, r.Find, tt.msg)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Find(%v) (-want +got):\n%s", tt.msg, diff)
			}
		})
	}
}

// manyKeys returns a message k00:0 ... k(n-1):n-1.
func manyKeys(n int) map[string]any {
	m := map[string]any{}
	for i := range n {
		m[fmt.Sprintf("k%02d", i)] = i
	}
	return m
}

func TestRouter_FindExact(t *testing.T) {
	tests := []struct {
		name string
		ops  []string
		msg  map[string]any
		want string
	}{
		{"every key matched", []string{"+a:1,b:2"}, map[string]any{"a": 1, "b": 2}, "a:1,b:2"},
		{"extra key", []string{"+a:1"}, map[string]any{"a": 1, "b": 2}, noMatch},
		{"extra key, narrower exists", []string{"+a:1", "+a:1,b:1"}, map[string]any{"a": 1, "b": 2}, noMatch},
		{"glob counts as matched", []string{"+a:1,b:*"}, map[string]any{"a": 1, "b": 2}, "a:1,b:*"},
		{"no entry on the path clears", []string{"+a:1", "+a:1,b:1,c:1"}, map[string]any{"a": 1, "b": 1}, noMatch},
		{"skipped level is fine", []string{"+a:1,c:1", "+a:1,b:1,c:1"}, map[string]any{"a": 1, "c": 1}, "a:1,c:1"},
		{"meta and nil keys do not count", []string{"+a:1"}, map[string]any{"a": 1, "b$": 2, "c": nil, "d": []any{}}, "a:1"},
		{"catch-all, empty message", []string{"+", "+a:1"}, map[string]any{}, ""},
		{"catch-all, unmatched key", []string{"+", "+a:1"}, map[string]any{"z": 1}, noMatch},
		{"catch-all, matched key", []string{"+", "+a:1"}, map[string]any{"a": 1}, "a:1"},
		{"empty router, empty message", nil, map[string]any{}, noMatch},
		{"tie", []string{"+a:0", "+b:1"}, map[string]any{"a": 0, "b": 1}, noMatch},
		// Keys matched on an abandoned branch do not count (patrun's
		// findexact would count x here and return y:2).
		{"abandoned branch does not count", []string{"+x:1,y:2,z:3", "+y:2"}, map[string]any{"x": 1, "y": 2}, noMatch},
		{"abandoned branch does not count, other key", []string{"+x:1,z:3", "+y:2"}, map[string]any{"x": 1, "y": 2}, noMatch},
		{"back to a skip and all keys matched", []string{"+x:1,y:2,z:3", "+y:2"}, map[string]any{"y": 2}, "y:2"},
		{"back to a skip, later keys", []string{"+a:1,b:1,c:1", "+b:1,c:1"}, map[string]any{"a": 1, "b": 1, "c": 2}, noMatch},
		{"values of any type", []string{"+a:1,b:true"}, map[string]any{"a": 1.0, "b": true}, "a:1,b:true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRouter(t, tt.ops...)
			got := found(t, r.FindExact, tt.msg)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("FindExact(%v) (-want +got):\n%s", tt.msg, diff)
			}
		})
	}
}

func TestRouter_Add_Duplicate(t *testing.T) {
	tests := []struct {
		name        string
		first, same string
	}{
		{"same text", "a:1,b:2", "a:1,b:2"},
		{"other spelling", "a:1,b:2", " b : 2 , a : 1.0 "},
		{"glob", "cmd:*", "cmd:*"},
		{"catch-all", "", " "},
		{"meta keys ignored", "a:1", "a:1,x$:2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRouter[string]()
			if err := r.Add(MustParse(tt.first), "first"); err != nil {
				t.Fatal(err)
			}
			err := r.Add(MustParse(tt.same), "second")
			if err == nil || !strings.Contains(err.Error(), "already added") {
				t.Fatalf("second Add error = %v, want \"already added\"", err)
			}
			v, p, ok := r.Find(messageOf(MustParse(tt.first)))
			if diff := cmp.Diff("first", v); diff != "" || !ok || !p.Equal(MustParse(tt.first)) {
				t.Errorf("after a failed Add, Find = %q, %q, %v; want the first value (-want +got):\n%s", v, p, ok, diff)
			}
			if diff := cmp.Diff(1, r.Len()); diff != "" {
				t.Errorf("Len (-want +got):\n%s", diff)
			}
		})
	}
}

// messageOf returns a message holding p's pairs.
func messageOf(p Pattern) map[string]any {
	m := map[string]any{}
	for _, pr := range p.Pairs() {
		m[pr.Key] = pr.Value
	}
	return m
}

func TestRouter_Remove(t *testing.T) {
	tests := []struct {
		name   string
		ops    []string
		remove string
		want   bool
		list   []string
	}{
		{"present", []string{"+a:1", "+a:1,b:1"}, "a:1", true, []string{"a:1,b:1"}},
		{"other spelling", []string{"+a:1,b:1"}, "b:1.0, a:1", true, nil},
		{"absent", []string{"+a:1"}, "a:2", false, []string{"a:1"}},
		{"absent wider", []string{"+a:1,b:1"}, "a:1", false, []string{"a:1,b:1"}},
		{"absent narrower", []string{"+a:1"}, "a:1,b:1", false, []string{"a:1"}},
		{"absent glob", []string{"+a:1"}, "a:*", false, []string{"a:1"}},
		{"absent catch-all", []string{"+a:1"}, "", false, []string{"a:1"}},
		{"catch-all", []string{"+", "+a:1"}, "", true, []string{"a:1"}},
		{"already removed", []string{"+a:1", "+b:1", "-a:1"}, "a:1", false, []string{"b:1"}},
		{"empty router", nil, "a:1", false, nil},
		{"last one", []string{"+a:*"}, "a:*", true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRouter(t, tt.ops...)
			if got := r.Remove(MustParse(tt.remove)); got != tt.want {
				t.Errorf("Remove(%q) = %v, want %v", tt.remove, got, tt.want)
			}
			if diff := cmp.Diff(tt.list, patternStrings(r.List())); diff != "" {
				t.Errorf("List (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(len(tt.list), r.Len()); diff != "" {
				t.Errorf("Len (-want +got):\n%s", diff)
			}
			// The rest still route to themselves.
			for _, s := range tt.list {
				p := MustParse(s)
				if got := found(t, r.FindExact, messageOf(p)); got != s && !p.HasGlob() {
					t.Errorf("FindExact(%q) = %q", s, got)
				}
			}
		})
	}
}

func TestRouter_List(t *testing.T) {
	r := newTestRouter(t, "+role:x,cmd:*", "+b:1", "+", "+a:2", "+a:10", "+B:1", "+a:1,b:1")
	want := []string{"", "B:1", "a:1,b:1", "a:10", "a:2", "b:1", "cmd:*,role:x"}
	if diff := cmp.Diff(want, patternStrings(r.List())); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(len(want), r.Len()); diff != "" {
		t.Errorf("Len (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string(nil), patternStrings(NewRouter[int]().List())); diff != "" {
		t.Errorf("empty List (-want +got):\n%s", diff)
	}
}

func TestRouter_Values(t *testing.T) {
	// The value is whatever was added with the pattern; a miss returns the
	// zero value.
	type handler struct{ id int }
	r := NewRouter[*handler]()
	h := &handler{1}
	if err := r.Add(MustParse("a:1"), h); err != nil {
		t.Fatal(err)
	}
	if v, _, ok := r.Find(map[string]any{"a": 1}); v != h || !ok {
		t.Errorf("Find = %v, %v; want the added value", v, ok)
	}
	if v, p, ok := r.Find(map[string]any{"a": 2}); v != nil || ok || p.Len() != 0 {
		t.Errorf("Find miss = %v, %q, %v; want nil, empty, false", v, p, ok)
	}
}

func TestRouter_FindPattern(t *testing.T) {
	// findPattern is the pre-parsed path: it must answer as Find does for a
	// message holding exactly the pattern's pairs.
	r := newTestRouter(t, "+a:1", "+a:1,b:1", "+x:1,y:2,z:3", "+y:2", "+role:x,cmd:*", "+role:x,cmd:get")
	for _, s := range []string{"a:1", "a:1,b:1", "a:1,b:2", "x:1,y:2", "cmd:get,role:x", "cmd:put,role:x", "z:1", ""} {
		t.Run(s, func(t *testing.T) {
			p := MustParse(s)
			want := found(t, r.Find, messageOf(p))
			got := noMatch
			if e := r.findPattern(p); e != nil {
				got = e.pattern.String()
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("findPattern(%q) (-Find +findPattern):\n%s", s, diff)
			}
		})
	}
}

func TestRouter_Concurrent(t *testing.T) {
	// Finds run while other patterns come and go; run with -race.
	r := newTestRouter(t, "+role:x,cmd:get", "+role:x")
	msg := map[string]any{"role": "x", "cmd": "get"}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				p := MustParse(fmt.Sprintf("other:%d,w:%d", i, w))
				if err := r.Add(p, p.String()); err != nil {
					t.Error(err)
					return
				}
				if got := found(t, r.Find, msg); got != "cmd:get,role:x" {
					t.Errorf("Find = %q", got)
					return
				}
				if !r.Remove(p) {
					t.Errorf("Remove(%q) = false", p)
					return
				}
				_ = r.List()
			}
		})
	}
	wg.Wait()
	if diff := cmp.Diff([]string{"cmd:get,role:x", "role:x"}, patternStrings(r.List())); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}

func BenchmarkRouter_Find(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		r := NewRouter[int]()
		roles := n / 10
		for i := range n {
			// Ten commands per role; every fiftieth role also has a
			// glob command and every hundredth a catch-all for the role.
			role, cmd := i/10, i%10
			if err := r.Add(MustParse(fmt.Sprintf("role:s%d,cmd:c%d", role, cmd)), i); err != nil {
				b.Fatal(err)
			}
		}
		for role := 0; role < roles; role += 50 {
			if err := r.Add(MustParse(fmt.Sprintf("role:s%d,cmd:x*", role)), -1); err != nil {
				b.Fatal(err)
			}
		}
		for role := 0; role < roles; role += 100 {
			if err := r.Add(MustParse(fmt.Sprintf("role:s%d", role)), -2); err != nil {
				b.Fatal(err)
			}
		}
		msgs := map[string][]map[string]any{}
		for i := range 64 {
			role := (i * 7919) % roles
			msgs["exact"] = append(msgs["exact"], map[string]any{"role": fmt.Sprintf("s%d", role), "cmd": fmt.Sprintf("c%d", i%10)})
			msgs["extra"] = append(msgs["extra"], map[string]any{"role": fmt.Sprintf("s%d", role), "cmd": fmt.Sprintf("c%d", i%10), "id": i, "user": "u"})
			msgs["glob"] = append(msgs["glob"], map[string]any{"role": fmt.Sprintf("s%d", role/50*50), "cmd": "xyz", "id": i})
		}
		for _, kind := range []string{"exact", "extra", "glob"} {
			b.Run(fmt.Sprintf("%d/%s", n, kind), func(b *testing.B) {
				b.ReportAllocs()
				ms := msgs[kind]
				i := 0
				for b.Loop() {
					if _, _, ok := r.Find(ms[i%len(ms)]); !ok {
						b.Fatalf("no match for %v", ms[i%len(ms)])
					}
					i++
				}
			})
		}
	}
}

// TestRouterRoutesBy: RoutesBy tells the keys of the patterns in the
// router, as they are added and removed.
func TestRouterRoutesBy(t *testing.T) {
	r := NewRouter[int]()
	a, b := MustParse("role:x,cmd:a"), MustParse("role:x,v:*")
	r.Add(a, 1)
	r.Add(b, 2)
	r.Remove(a)
	got := map[string]bool{}
	for _, k := range []string{"role", "cmd", "v", "s"} {
		got[k] = r.RoutesBy(k)
	}
	if want := map[string]bool{"role": true, "cmd": false, "v": true, "s": false}; !maps.Equal(want, got) {
		t.Errorf("RoutesBy after adding %s and %s and removing the first: got %v, want %v", a, b, got, want)
	}
}
