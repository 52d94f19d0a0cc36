package patrun

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// This file holds a slow, literal reference implementation of patrun's add
// and find (DESIGN §2, "Precedence"), used as an oracle for Router. It keeps
// nothing between queries: every message is looked up in a tree built afresh
// from the ordered list of patterns, so a removal is simply a rebuild without
// the pattern, the others keeping their add order.

// refPat is one added pattern of the oracle: its pairs, sorted by key, and
// the name it was added under.
type refPat struct {
	name  string
	pairs []Pair
}

// refNode is one node of the oracle's tree. A node either has a level
// (hasLevel: one key, its exact values, its globs in the order added, and a
// skip branch for the rest of the keys) or none. data is the pattern that
// ends at the node, if any.
type refNode struct {
	data     *refPat
	hasLevel bool
	key      string
	vals     map[string]*refNode
	globs    []refGlob
	skip     *refNode
}

type refGlob struct {
	glob string
	node *refNode
}

// refIsGlob reports whether a pattern value is a glob.
func refIsGlob(v string) bool {
	return strings.Contains(v, "*") || strings.Contains(v, "?")
}

// refGlobs caches refGlobMatch's regexps; tests using it do not run in
// parallel.
var refGlobs = map[string]*regexp.Regexp{}

// refGlobMatch matches by translating the glob to an anchored regexp: '*' is
// any run of characters, '?' exactly one, everything else literal.
func refGlobMatch(glob, s string) bool {
	if re, ok := refGlobs[glob]; ok {
		return re.MatchString(s)
	}
	var b strings.Builder
	b.WriteString(`^(?s:`)
	for _, r := range glob {
		switch r {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`)$`)
	re := regexp.MustCompile(b.String())
	refGlobs[glob] = re
	return re.MatchString(s)
}

// next returns the node under value v at n's level, creating it: exact
// values in the value map, globs in the glob list, appended when new.
func (n *refNode) next(v string) *refNode {
	if refIsGlob(v) {
		for _, g := range n.globs {
			if g.glob == v {
				return g.node
			}
		}
		c := &refNode{}
		n.globs = append(n.globs, refGlob{glob: v, node: c})
		return c
	}
	if n.vals[v] == nil {
		n.vals[v] = &refNode{}
	}
	return n.vals[v]
}

// refAdd inserts p into the tree rooted at top, as patrun's add does.
func refAdd(top *refNode, p *refPat) {
	n := top
	i := 0
	for i < len(p.pairs) {
		key, val := p.pairs[i].Key, p.pairs[i].Value
		if n.hasLevel && n.key == key {
			// An existing key: go down its value.
			n = n.next(val)
			i++
		} else if !n.hasLevel {
			// The end of the key path: a new level, ordered last.
			n.hasLevel = true
			n.key = key
			n.vals = map[string]*refNode{}
			n = n.next(val)
			i++
		} else if key < n.key {
			// The key orders before this level: insert it here and move
			// the old level, whole, into the skip branch.
			old := &refNode{
				hasLevel: true,
				key:      n.key,
				vals:     n.vals,
				globs:    n.globs,
				skip:     n.skip,
			}
			n.key = key
			n.vals = map[string]*refNode{}
			n.globs = nil
			n.skip = old
			n = n.next(val)
			i++
		} else {
			// The key orders after this level: follow the skip path; the
			// key is still to be inserted.
			if n.skip == nil {
				n.skip = &refNode{}
			}
			n = n.skip
		}
	}
	n.data = p
}

// refBuild builds a fresh tree from the patterns, in the order given.
func refBuild(pats []*refPat) *refNode {
	top := &refNode{}
	for _, p := range pats {
		refAdd(top, p)
	}
	return top
}

// refFind is patrun's find on the tree rooted at top. msg maps each routed
// key to its value. With exact, a node without data clears the result, and
// the result counts only when every key of msg was matched on the branch
// that produced it.
func refFind(top *refNode, msg map[string]string, exact bool) *refPat {
	type starred struct {
		node  *refNode
		found map[string]bool
	}
	var stars []starred
	found := map[string]bool{}
	data := top.data
	n := top
	for n != nil {
		if n.hasLevel {
			var next *refNode
			if val, ok := msg[n.key]; ok {
				next = n.vals[val]
				if next == nil {
					for _, g := range n.globs {
						if refGlobMatch(g.glob, val) {
							next = g.node
							break
						}
					}
				}
			}
			if next != nil {
				if n.skip != nil {
					stars = append(stars, starred{n.skip, copyFound(found)})
				}
				found[n.key] = true
				if next.data != nil {
					data = next.data
				} else if exact {
					data = nil
				}
				n = next
			} else {
				n = n.skip
			}
		} else {
			n = nil
		}
		if n == nil && data == nil && len(stars) > 0 {
			last := stars[len(stars)-1]
			stars = stars[:len(stars)-1]
			n, found = last.node, last.found
		}
	}
	if exact {
		if len(found) != len(msg) {
			return nil
		}
		return data
	}
	if data == nil {
		data = top.data
	}
	return data
}

func copyFound(m map[string]bool) map[string]bool {
	c := make(map[string]bool, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// refRouter is the oracle's whole state: the patterns in the order added.
type refRouter struct {
	pats []*refPat
}

func (r *refRouter) index(s string) int {
	return slices.IndexFunc(r.pats, func(p *refPat) bool { return p.name == s })
}

func (r *refRouter) add(p Pattern) bool {
	if r.index(p.String()) >= 0 {
		return false
	}
	r.pats = append(r.pats, &refPat{name: p.String(), pairs: p.Pairs()})
	return true
}

func (r *refRouter) remove(p Pattern) bool {
	i := r.index(p.String())
	if i < 0 {
		return false
	}
	r.pats = slices.Delete(r.pats, i, i+1)
	return true
}

// find builds the tree afresh and walks it, once without and once with
// exact; it returns the names of the patterns found ("" for none) and
// whether each found one.
func (r *refRouter) find(msg map[string]string) (find, exact refAnswer) {
	top := refBuild(r.pats)
	return refAnswerOf(refFind(top, msg, false)), refAnswerOf(refFind(top, msg, true))
}

type refAnswer struct {
	name string
	ok   bool
}

func refAnswerOf(p *refPat) refAnswer {
	if p == nil {
		return refAnswer{}
	}
	return refAnswer{p.name, true}
}

func (r *refRouter) list() []string {
	var out []string
	for _, p := range r.pats {
		out = append(out, p.name)
	}
	slices.Sort(out)
	return out
}

// refMessage turns a generated message into the oracle's form: routed keys
// only, values as strings.
func refMessage(msg map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range msg {
		if strings.HasSuffix(k, "$") {
			continue // metadata never routes
		}
		switch x := v.(type) {
		case string:
			out[k] = x
		case int:
			out[k] = strconv.Itoa(x)
		case float64:
			out[k] = strconv.FormatFloat(x, 'f', -1, 64) // generated floats are whole
		case bool:
			out[k] = strconv.FormatBool(x)
		}
	}
	return out
}

func TestRefOracle_DesignExamples(t *testing.T) {
	// The oracle must itself give DESIGN §2's answers before it judges.
	tests := []struct {
		name     string
		patterns []string
		msg      map[string]string
		want     string
	}{
		{"wider", []string{"a:1", "a:1,b:1"}, map[string]string{"a": "1", "b": "2"}, "a:1"},
		{"narrower", []string{"a:1", "a:1,b:1"}, map[string]string{"a": "1", "b": "1"}, "a:1,b:1"},
		{"tie first key", []string{"a:0", "b:1", "c:2"}, map[string]string{"b": "1", "c": "2"}, "b:1"},
		{"fallback", []string{"a:1,b:2", "a:1,c:3"}, map[string]string{"a": "1", "b": "9", "c": "3"}, "a:1,c:3"},
		{"back to skip", []string{"x:1,y:2,z:3", "y:2"}, map[string]string{"x": "1", "y": "2"}, "y:2"},
		{"exact over glob", []string{"role:x,cmd:*", "role:x,cmd:get"}, map[string]string{"role": "x", "cmd": "get"}, "cmd:get,role:x"},
		{"glob", []string{"role:x,cmd:*", "role:x,cmd:get"}, map[string]string{"role": "x", "cmd": "put"}, "cmd:*,role:x"},
		{"exact beats glob at key", []string{"a:1", "a:*,b:2"}, map[string]string{"a": "1", "b": "2"}, "a:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r refRouter
			for _, s := range tt.patterns {
				r.add(MustParse(s))
			}
			got, _ := r.find(tt.msg)
			if diff := cmp.Diff(tt.want, got.name); diff != "" {
				t.Errorf("oracle find (-want +got):\n%s", diff)
			}
		})
	}
}

// refGen draws random patterns and messages over small alphabets, so that
// patterns overlap a lot.
type refGen struct {
	rng *rand.Rand
}

var (
	refKeys      = []string{"a", "b", "c", "d", "e"}
	refPatValues = []string{"1", "2", "3", "12", "*", "1*", "?", "*2", "x?"}
	refMsgValues = []string{"1", "2", "3", "12", "22", "x1", "x", ""}
)

func (g refGen) pattern() Pattern {
	if g.rng.IntN(25) == 0 {
		return Pattern{} // the catch-all
	}
	n := 1 + g.rng.IntN(3)
	var pairs []Pair
	for _, i := range g.rng.Perm(len(refKeys))[:n] {
		pairs = append(pairs, Pair{refKeys[i], refPatValues[g.rng.IntN(len(refPatValues))]})
	}
	p, err := patternOf(pairs...)
	if err != nil {
		panic(err)
	}
	return p
}

func (g refGen) message() map[string]any {
	msg := map[string]any{}
	n := g.rng.IntN(len(refKeys) + 1)
	for _, i := range g.rng.Perm(len(refKeys))[:n] {
		v := refMsgValues[g.rng.IntN(len(refMsgValues))]
		switch x, err := strconv.Atoi(v); {
		case err == nil && g.rng.IntN(4) == 0:
			msg[refKeys[i]] = x // numbers route as their decimal string
		case err == nil && g.rng.IntN(4) == 0:
			msg[refKeys[i]] = float64(x)
		default:
			msg[refKeys[i]] = v
		}
	}
	if g.rng.IntN(8) == 0 {
		msg["meta$"] = "1" // never routes
	}
	if g.rng.IntN(8) == 0 {
		msg["a"] = map[string]any{"x": 1} // nested: never routes
	}
	return msg
}

func TestRouter_MatchesReference(t *testing.T) {
	const (
		sets     = 2000
		ops      = 12
		messages = 5
	)
	rng := rand.New(rand.NewPCG(0x5eed, 0xc0ffee))
	g := refGen{rng}
	for set := range sets {
		r := NewRouter[string]()
		var ref refRouter
		var added []Pattern // every pattern used in this set, for removals
		var log []string    // operations so far, to report a failure
		for range ops {
			switch {
			case len(added) > 0 && rng.IntN(3) == 0:
				p := added[rng.IntN(len(added))]
				if rng.IntN(2) == 0 {
					p = MustParse(p.String()) // equal, not the pattern added
				}
				log = append(log, fmt.Sprintf("remove %q", p))
				want := ref.remove(p)
				var gone Pattern // the pattern as added
				if e := r.all[p.String()]; e != nil {
					gone = e.pattern
				}
				if got := r.Remove(p); got != want {
					t.Fatalf("set %d: %v: Remove = %v, want %v", set, log, got, want)
				}
				if held := heldPairs(&r.root); gone.p != nil {
					for i := range gone.pairs() {
						if held[&gone.pairs()[i]] {
							t.Fatalf("set %d: %v: the tree still holds pair %d of the pattern removed", set, log, i)
						}
					}
				}
			default:
				p := g.pattern()
				if rng.IntN(6) == 0 && len(added) > 0 {
					p = added[rng.IntN(len(added))] // try a duplicate
				}
				added = append(added, p)
				log = append(log, fmt.Sprintf("add %q", p))
				want := ref.add(p)
				if err := r.Add(p, p.String()); (err == nil) != want {
					t.Fatalf("set %d: %v: Add error = %v, want success %v", set, log, err, want)
				}
			}
			if diff := cmp.Diff(ref.list(), patternStrings(r.List())); diff != "" {
				t.Fatalf("set %d: %v: List (-want +got):\n%s", set, log, diff)
			}
			if got, want := r.Len(), len(ref.pats); got != want {
				t.Fatalf("set %d: %v: Len = %d, want %d", set, log, got, want)
			}
			for range messages {
				msg := g.message()
				rmsg := refMessage(msg)
				wantFind, wantExact := ref.find(rmsg)
				for _, c := range []struct {
					name string
					find func(map[string]any) (string, Pattern, bool)
					want refAnswer
				}{
					{"Find", r.Find, wantFind},
					{"FindExact", r.FindExact, wantExact},
				} {
					v, p, ok := c.find(msg)
					if ok != c.want.ok || v != c.want.name || p.String() != c.want.name {
						t.Fatalf("set %d: %v: %s(%v) = %q, %q, %v; want %q, %v",
							set, log, c.name, msg, v, p, ok, c.want.name, c.want.ok)
					}
				}
				// The pre-parsed path: the message's routed pairs as a pattern.
				var pairs []Pair
				for k, v := range rmsg {
					pairs = append(pairs, Pair{k, v})
				}
				mp, err := patternOf(pairs...)
				if err != nil {
					t.Fatal(err)
				}
				e := r.findPattern(mp)
				if (e != nil) != wantFind.ok || e != nil && e.value != wantFind.name {
					t.Fatalf("set %d: %v: findPattern(%q) = %+v; want %q, %v",
						set, log, mp, e, wantFind.name, wantFind.ok)
				}
			}
		}
	}
}

func patternStrings(ps []Pattern) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

// heldPairs returns the pairs n's tree holds for its levels.
func heldPairs[V any](n *rnode[V]) map[*Pair]bool {
	held := map[*Pair]bool{}
	var walk func(n *rnode[V])
	walk = func(n *rnode[V]) {
		if n == nil {
			return
		}
		if n.at != nil {
			held[n.at] = true
		}
		walk(n.only)
		if m := n.more; m != nil {
			for _, c := range m.vals {
				walk(c)
			}
			for _, g := range m.globs {
				walk(g.node)
			}
			walk(m.skip)
		}
	}
	walk(n)
	return held
}
