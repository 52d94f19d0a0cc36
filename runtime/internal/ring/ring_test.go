package ring

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type weighted struct {
	t string
	w int
}

func newRing(ts ...weighted) *Ring[string] {
	r := new(Ring[string])
	for _, t := range ts {
		r.Add(t.t, t.w)
	}
	return r
}

func picks(r *Ring[string], n int, skip func(string) bool) []string {
	var got []string
	for range n {
		t, ok := r.Pick(skip)
		if !ok {
			t = "-"
		}
		got = append(got, t)
	}
	return got
}

func all(r *Ring[string]) []weighted {
	var got []weighted
	for t, w := range r.All() {
		got = append(got, weighted{t, w})
	}
	return got
}

func TestPickSequence(t *testing.T) {
	tests := []struct {
		name    string
		targets []weighted
		want    string
	}{
		{"empty", nil, "- -"},
		{"one", []weighted{{"a", 1}}, "a a a"},
		{"equal weights", []weighted{{"a", 1}, {"b", 1}, {"c", 1}}, "a b c a b c a"},
		{"two and one", []weighted{{"a", 2}, {"b", 1}}, "a a b a a b"},
		{"three one two", []weighted{{"a", 3}, {"b", 1}, {"c", 2}}, "a a a b c c a a a b c c"},
		{"zero and negative clamp to one", []weighted{{"a", 0}, {"b", -5}, {"c", 2}}, "a b c c a b c c"},
		{"large weight", []weighted{{"a", 5}, {"b", 1}}, "a a a a a b a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing(tt.targets...)
			want := splitWords(tt.want)
			if diff := cmp.Diff(want, picks(r, len(want), nil)); diff != "" {
				t.Errorf("picks without skip (-want +got):\n%s", diff)
			}
			// A skip function that skips nothing must not change the order.
			r = newRing(tt.targets...)
			none := func(string) bool { return false }
			if diff := cmp.Diff(want, picks(r, len(want), none)); diff != "" {
				t.Errorf("picks with a skip that skips nothing (-want +got):\n%s", diff)
			}
		})
	}
}

func splitWords(s string) []string { return strings.Fields(s) }

func TestRemove(t *testing.T) {
	tests := []struct {
		name    string
		targets []weighted
		before  int // picks before the removal
		remove  string
		want    string // picks after it
		ok      bool
	}{
		{"cursor mid count moves to next with a full turn", []weighted{{"a", 3}, {"b", 2}, {"c", 1}}, 1, "a", "b b c b b c", true},
		{"cursor with its count spent", []weighted{{"a", 2}, {"b", 2}, {"c", 1}}, 2, "a", "b b c b b", true},
		{"target after the cursor", []weighted{{"a", 2}, {"b", 1}, {"c", 1}}, 1, "b", "a c a a c", true},
		{"target before the cursor", []weighted{{"a", 1}, {"b", 1}, {"c", 1}}, 2, "a", "c b c b", true},
		{"last target in the slice moved into the hole", []weighted{{"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}}, 0, "a", "b c d b c d", true},
		{"cursor on the last slice node, hole before it", []weighted{{"a", 1}, {"b", 1}, {"c", 2}}, 3, "a", "c b c c b", true},
		{"one of two, the other moved into its slot", []weighted{{"a", 1}, {"b", 2}}, 0, "a", "b b b", true},
		{"only target", []weighted{{"a", 2}}, 1, "a", "- -", true},
		{"absent", []weighted{{"a", 1}, {"b", 1}}, 1, "x", "b a b", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing(tt.targets...)
			picks(r, tt.before, nil)
			if ok := r.Remove(tt.remove); ok != tt.ok {
				t.Errorf("Remove(%q) = %v, want %v", tt.remove, ok, tt.ok)
			}
			want := splitWords(tt.want)
			if diff := cmp.Diff(want, picks(r, len(want), nil)); diff != "" {
				t.Errorf("picks after Remove (-want +got):\n%s", diff)
			}
			if n := r.Len(); n != len(tt.targets)-btoi(tt.ok) {
				t.Errorf("Len() = %d, want %d", n, len(tt.targets)-btoi(tt.ok))
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestRemoveAllThenAdd(t *testing.T) {
	r := newRing(weighted{"a", 1}, weighted{"b", 2})
	picks(r, 2, nil)
	r.Remove("a")
	r.Remove("b")
	if _, ok := r.Pick(nil); ok {
		t.Fatal("Pick on an emptied ring reported a target")
	}
	r.Add("c", 2)
	r.Add("d", 1)
	if diff := cmp.Diff(splitWords("c c d c c d"), picks(r, 6, nil)); diff != "" {
		t.Errorf("picks (-want +got):\n%s", diff)
	}
}

func TestAddDuringCycle(t *testing.T) {
	tests := []struct {
		name   string
		before int
		want   string
	}{
		// a:2 b:2; c is added just before the cursor: the cursor's target
		// finishes its turn, every other target has its turn, then c.
		{"at start", 0, "a a b b c a a b b c"},
		{"mid turn of a", 1, "a b b c a a b b c"},
		{"a's turn spent", 2, "b b c a a b b c"},
		{"mid turn of b", 3, "b a a c b b a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing(weighted{"a", 2}, weighted{"b", 2})
			picks(r, tt.before, nil)
			if !r.Add("c", 1) {
				t.Fatal("Add of a new target reported false")
			}
			want := splitWords(tt.want)
			if diff := cmp.Diff(want, picks(r, len(want), nil)); diff != "" {
				t.Errorf("picks after Add (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAddPresentSetsWeight(t *testing.T) {
	r := newRing(weighted{"a", 1}, weighted{"b", 1})
	if r.Add("b", 3) {
		t.Error("Add of a present target reported true")
	}
	if w, ok := r.Weight("b"); w != 3 || !ok {
		t.Errorf("Weight(b) = %d, %v; want 3, true", w, ok)
	}
	if diff := cmp.Diff(splitWords("a b b b a"), picks(r, 5, nil)); diff != "" {
		t.Errorf("picks (-want +got):\n%s", diff)
	}
}

func TestSetWeight(t *testing.T) {
	tests := []struct {
		name   string
		before int
		target string
		weight int
		want   string
	}{
		{"shorten the running turn", 1, "a", 1, "a b a b"},          // 2 picks were left, now 1
		{"lengthen the running turn", 1, "a", 5, "a a b a a a a a"}, // the turn keeps its count
		{"other target", 1, "b", 2, "a a b b a"},
		{"clamped", 0, "a", 0, "a b a b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing(weighted{"a", 3}, weighted{"b", 1})
			picks(r, tt.before, nil)
			if !r.SetWeight(tt.target, tt.weight) {
				t.Fatalf("SetWeight(%q) reported false", tt.target)
			}
			want := splitWords(tt.want)
			if diff := cmp.Diff(want, picks(r, len(want), nil)); diff != "" {
				t.Errorf("picks after SetWeight (-want +got):\n%s", diff)
			}
		})
	}
	r := newRing(weighted{"a", 1})
	if r.SetWeight("x", 2) {
		t.Error("SetWeight of an absent target reported true")
	}
	if _, ok := r.Weight("x"); ok {
		t.Error("Weight of an absent target reported true")
	}
}

func TestSkip(t *testing.T) {
	tests := []struct {
		name    string
		targets []weighted
		before  int
		skip    string // targets skipped, space separated
		want    string
	}{
		{"one skipped", []weighted{{"a", 2}, {"b", 1}, {"c", 1}}, 0, "b", "a a c a a c"},
		{"cursor skipped loses its turn", []weighted{{"a", 3}, {"b", 1}}, 1, "a", "b b b"},
		{"all but one", []weighted{{"a", 1}, {"b", 2}, {"c", 1}}, 0, "a c", "b b b b"},
		{"all", []weighted{{"a", 1}, {"b", 2}}, 0, "a b", "- -"},
		{"empty", nil, 0, "a", "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing(tt.targets...)
			picks(r, tt.before, nil)
			skipped := splitWords(tt.skip)
			skip := func(t string) bool { return slices.Contains(skipped, t) }
			want := splitWords(tt.want)
			if diff := cmp.Diff(want, picks(r, len(want), skip)); diff != "" {
				t.Errorf("picks (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSkipCalls checks the contract that lets skip take a resource: each
// target is offered at most once per Pick, and the one accepted is the one
// returned.
func TestSkipCalls(t *testing.T) {
	r := newRing(weighted{"a", 1}, weighted{"b", 1}, weighted{"c", 1}, weighted{"d", 1})
	for _, reject := range [][]string{nil, {"a"}, {"a", "b", "c"}, {"a", "b", "c", "d"}} {
		var offered []string
		got, ok := r.Pick(func(t string) bool {
			offered = append(offered, t)
			return slices.Contains(reject, t)
		})
		seen := map[string]bool{}
		for _, o := range offered {
			if seen[o] {
				t.Errorf("reject %v: %q offered twice in one Pick: %v", reject, o, offered)
			}
			seen[o] = true
		}
		if !ok {
			if len(offered) != 4 {
				t.Errorf("reject %v: Pick failed after offering %v, want every target", reject, offered)
			}
			continue
		}
		if last := offered[len(offered)-1]; last != got {
			t.Errorf("reject %v: Pick returned %q, but the last target offered was %q", reject, got, last)
		}
	}
}

func TestAll(t *testing.T) {
	r := newRing(weighted{"a", 1}, weighted{"b", 2}, weighted{"c", 3})
	if diff := cmp.Diff([]weighted{{"a", 1}, {"b", 2}, {"c", 3}}, all(r), cmp.AllowUnexported(weighted{})); diff != "" {
		t.Errorf("All (-want +got):\n%s", diff)
	}
	picks(r, 2, nil) // cursor on b
	if diff := cmp.Diff([]weighted{{"b", 2}, {"c", 3}, {"a", 1}}, all(r), cmp.AllowUnexported(weighted{})); diff != "" {
		t.Errorf("All after two picks (-want +got):\n%s", diff)
	}
	// The loop body may change the ring.
	for t := range r.All() {
		r.Remove(t)
	}
	if r.Len() != 0 {
		t.Errorf("Len after removing all in the loop = %d", r.Len())
	}
	// Stopping early.
	r = newRing(weighted{"a", 1}, weighted{"b", 1})
	for range r.All() {
		break
	}
}

// TestConcurrentPicksAreExact checks that concurrent picks share one
// cursor: with a fixed set of targets, n*k picks from many goroutines
// pick every target exactly k times its weight.
func TestConcurrentPicksAreExact(t *testing.T) {
	const goroutines, rounds = 8, 400
	r := newRing(weighted{"a", 1}, weighted{"b", 2}, weighted{"c", 3}, weighted{"d", 4})
	perRound := 10
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			local := map[string]int{}
			for range rounds * perRound / goroutines {
				tg, ok := r.Pick(nil)
				if !ok {
					t.Error("Pick failed on a full ring")
					return
				}
				local[tg]++
			}
			mu.Lock()
			for k, v := range local {
				counts[k] += v
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	want := map[string]int{"a": rounds, "b": 2 * rounds, "c": 3 * rounds, "d": 4 * rounds}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("pick counts (-want +got):\n%s", diff)
	}
}

// TestConcurrentChanges runs picks, adds, removes, reweights and
// iterations at once; run with -race.
func TestConcurrentChanges(t *testing.T) {
	r := new(Ring[int])
	for i := range 16 {
		r.Add(i, 1+i%3)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			skip := func(t int) bool { return t%4 == g }
			for range 2000 {
				// Pick may fail while the ring holds only skipped targets;
				// what counts is that the links survive, checked below.
				r.Pick(skip)
			}
		})
	}
	for g := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 2000 {
				t := rng.IntN(32)
				switch rng.IntN(3) {
				case 0:
					r.Add(t, rng.IntN(4))
				case 1:
					r.Remove(t)
				case 2:
					r.SetWeight(t, rng.IntN(4))
				}
			}
		})
	}
	wg.Go(func() {
		for range 200 {
			n := 0
			for range r.All() {
				n++
			}
		}
	})
	wg.Wait()
	// The links must still form one ring over every target.
	n := 0
	seen := map[int]bool{}
	for tg := range r.All() {
		if seen[tg] {
			t.Fatalf("target %d twice in All", tg)
		}
		seen[tg] = true
		n++
	}
	if n != r.Len() {
		t.Errorf("All yields %d targets, Len is %d", n, r.Len())
	}
}

func TestZeroValue(t *testing.T) {
	var r Ring[string]
	if _, ok := r.Pick(nil); ok {
		t.Error("Pick on the zero Ring reported a target")
	}
	if r.Remove("a") || r.SetWeight("a", 1) || r.Len() != 0 {
		t.Error("zero Ring is not empty")
	}
	r.Add("a", 1)
	if got, ok := r.Pick(nil); got != "a" || !ok {
		t.Errorf("Pick = %q, %v", got, ok)
	}
}

// model is a slow, literal ring: targets in a slice in ring order.
type model struct {
	order     []string
	weight    map[string]int
	cur, left int
}

func (m *model) add(t string, w int) bool {
	w = max(w, 1)
	if i := slices.Index(m.order, t); i >= 0 {
		m.weight[t] = w
		if i == m.cur {
			m.left = min(m.left, w)
		}
		return false
	}
	m.weight[t] = w
	if len(m.order) == 0 {
		m.order, m.cur, m.left = []string{t}, 0, w
		return true
	}
	m.order = slices.Insert(m.order, m.cur, t)
	m.cur++
	return true
}

func (m *model) remove(t string) bool {
	i := slices.Index(m.order, t)
	if i < 0 {
		return false
	}
	m.order = slices.Delete(m.order, i, i+1)
	delete(m.weight, t)
	switch {
	case len(m.order) == 0:
		m.cur, m.left = 0, 0
	case i < m.cur:
		m.cur--
	case i == m.cur:
		if m.cur == len(m.order) {
			m.cur = 0
		}
		m.left = m.weight[m.order[m.cur]]
	}
	return true
}

func (m *model) setWeight(t string, w int) bool {
	if !slices.Contains(m.order, t) {
		return false
	}
	m.add(t, w)
	return true
}

func (m *model) pick(skip func(string) bool) (string, bool) {
	for range len(m.order) {
		if m.left == 0 {
			m.cur = (m.cur + 1) % len(m.order)
			m.left = m.weight[m.order[m.cur]]
		}
		t := m.order[m.cur]
		if skip(t) {
			m.left = 0
			continue
		}
		m.left--
		return t, true
	}
	return "", false
}

func (m *model) all() []weighted {
	var out []weighted
	for i := range m.order {
		t := m.order[(m.cur+i)%len(m.order)]
		out = append(out, weighted{t, m.weight[t]})
	}
	return out
}

// TestAgainstModel runs random operations on a Ring and on the model and
// compares every answer, every skip offer and the ring order after each
// step.
func TestAgainstModel(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x5eed))
			r := new(Ring[string])
			m := &model{weight: map[string]int{}}
			universe := 1 + rng.IntN(40)
			for step := range 3000 {
				tg := fmt.Sprint("t", rng.IntN(universe))
				w := rng.IntN(5) - 1
				var op string
				switch k := rng.IntN(10); {
				case k < 2:
					op = "add"
					if got, want := r.Add(tg, w), m.add(tg, w); got != want {
						t.Fatalf("step %d: Add(%s, %d) = %v, model %v", step, tg, w, got, want)
					}
				case k < 3:
					op = "remove"
					if got, want := r.Remove(tg), m.remove(tg); got != want {
						t.Fatalf("step %d: Remove(%s) = %v, model %v", step, tg, got, want)
					}
				case k < 4:
					op = "setweight"
					if got, want := r.SetWeight(tg, w), m.setWeight(tg, w); got != want {
						t.Fatalf("step %d: SetWeight(%s, %d) = %v, model %v", step, tg, w, got, want)
					}
				default:
					op = "pick"
					// Skip each target with a probability fixed for this pick.
					// A nil skip func for the ring means skipping nothing.
					p := rng.Float64() * rng.Float64()
					if p <= 0.05 {
						p = 0
					}
					verdict := map[string]bool{}
					for i := range universe {
						verdict[fmt.Sprint("t", i)] = rng.Float64() < p
					}
					var offeredR, offeredM []string
					var skipR, skipM func(string) bool
					if p > 0 {
						skipR = func(t string) bool { offeredR = append(offeredR, t); return verdict[t] }
					}
					skipM = func(t string) bool { offeredM = append(offeredM, t); return verdict[t] }
					gotT, gotOK := r.Pick(skipR)
					wantT, wantOK := m.pick(skipM)
					if gotT != wantT || gotOK != wantOK {
						t.Fatalf("step %d: Pick = %q, %v; model %q, %v", step, gotT, gotOK, wantT, wantOK)
					}
					if skipR != nil {
						if diff := cmp.Diff(offeredM, offeredR); diff != "" {
							t.Fatalf("step %d: skip offers (-model +ring):\n%s", step, diff)
						}
					}
				}
				if diff := cmp.Diff(m.all(), all(r), cmp.AllowUnexported(weighted{})); diff != "" {
					t.Fatalf("step %d after %s %s: All (-model +ring):\n%s", step, op, tg, diff)
				}
				if r.Len() != len(m.order) {
					t.Fatalf("step %d: Len = %d, model %d", step, r.Len(), len(m.order))
				}
			}
		})
	}
}

// TestLargeRingShrinks adds and removes many targets and checks the ring
// stays whole and its storage shrinks.
func TestLargeRingShrinks(t *testing.T) {
	r := new(Ring[int])
	const n = 10000
	for i := range n {
		r.Add(i, 1)
	}
	for i := range n {
		got, ok := r.Pick(nil)
		if !ok || got != i {
			t.Fatalf("pick %d = %d, %v", i, got, ok)
		}
	}
	for i := 0; i < n; i += 2 {
		r.Remove(i)
	}
	for i := range n / 2 {
		got, _ := r.Pick(nil)
		if want := 2*i + 1; got != want {
			t.Fatalf("pick %d after removing evens = %d, want %d", i, got, want)
		}
	}
	for i := 1; i < n-2; i += 2 {
		r.Remove(i)
	}
	if c := cap(r.nodes); c > 64 {
		t.Errorf("cap(nodes) = %d with %d targets, want it shrunk", c, r.Len())
	}
	if got := picks2(r, 3); !slices.Equal(got, []int{n - 1, n - 1, n - 1}) {
		t.Errorf("picks = %v", got)
	}
}

func picks2(r *Ring[int], n int) []int {
	var out []int
	for range n {
		t, _ := r.Pick(nil)
		out = append(out, t)
	}
	return out
}
