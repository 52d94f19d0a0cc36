package lb

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// mustHash is NewConsistentHash for arguments known to be valid.
func mustHash[T comparable](name func(T) string, replicas int) *ConsistentHash[T] {
	c, err := NewConsistentHash(name, replicas)
	if err != nil {
		panic(err)
	}
	return c
}

func newHash(replicas int, targets ...string) *ConsistentHash[string] {
	c := mustHash(func(s string) string { return s }, replicas)
	for _, t := range targets {
		c.Add(t, 1)
	}
	return c
}

func route(c *ConsistentHash[string], keys int) map[string]string {
	m := make(map[string]string, keys)
	for i := range keys {
		k := fmt.Sprint("user-", i)
		t, ok := c.Pick(k, nil)
		if !ok {
			panic("Pick failed")
		}
		m[k] = t
	}
	return m
}

func TestStringHashKnownAnswers(t *testing.T) {
	// FNV-1a 64 test vectors: routing must not change between versions,
	// or processes on different versions would disagree.
	for s, want := range map[string]uint64{
		"":       0xcbf29ce484222325,
		"a":      0xaf63dc4c8601ec8c,
		"foobar": 0x85944171f73967e8,
	} {
		if got := stringHash(s); got != want {
			t.Errorf("stringHash(%q) = %#x, want %#x", s, got, want)
		}
	}
	c := newHash(0, "alpha", "beta", "gamma")
	got := map[string]string{}
	for _, k := range []string{"", "user-1", "user-2", "user-3", "order-42"} {
		got[k], _ = c.Pick(k, nil)
	}
	// Computed independently (a Python transcription of the algorithm).
	want := map[string]string{"": "beta", "user-1": "alpha", "user-2": "beta", "user-3": "alpha", "order-42": "gamma"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
}

func TestConsistentHashSticky(t *testing.T) {
	c := newHash(0, names(10)...)
	first := route(c, 2000)
	for range 3 {
		if diff := cmp.Diff(first, route(c, 2000)); diff != "" {
			t.Fatalf("routes changed with the set unchanged (-first +now):\n%s", diff)
		}
	}
}

// TestConsistentHashOrderIndependent checks two processes that learn of
// the same targets in different orders route alike.
func TestConsistentHashOrderIndependent(t *testing.T) {
	all := names(20)
	a := newHash(0, all...)
	shuffled := slices.Clone(all)
	rand.New(rand.NewPCG(7, 8)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	b := newHash(0)
	for i, n := range shuffled {
		b.Add(n, 1)
		if i%5 == 0 {
			b.Pick("", nil) // rebuild part way
		}
	}
	b.Add("extra", 1)
	b.Pick("", nil)
	b.Remove("extra")
	if diff := cmp.Diff(route(a, 3000), route(b, 3000)); diff != "" {
		t.Errorf("routes differ by insertion order (-in order +shuffled):\n%s", diff)
	}
}

// TestConsistentHashMovement checks adding a target moves only keys to
// it, about 1/(n+1) of them, and removing one moves only its own keys.
func TestConsistentHashMovement(t *testing.T) {
	const keys = 20000
	c := newHash(0, names(10)...)
	before := route(c, keys)

	c.Add("new", 1)
	after := route(c, keys)
	moved := 0
	for k, t0 := range before {
		if t1 := after[k]; t1 != t0 {
			moved++
			if t1 != "new" {
				t.Fatalf("key %s moved from %s to %s, not to the new target", k, t0, t1)
			}
		}
	}
	if share := float64(moved) / keys; share < 0.06 || share > 0.13 {
		t.Errorf("adding an 11th target moved %.3f of keys, want about 1/11", share)
	}

	c.Remove("t03")
	final := route(c, keys)
	for k, t0 := range after {
		if t1 := final[k]; t0 != "t03" && t1 != t0 {
			t.Fatalf("key %s moved from %s to %s though %s stayed", k, t0, t1, t0)
		}
		if final[k] == "t03" {
			t.Fatalf("key %s still goes to the removed target", k)
		}
	}
	// Removing the added target restores the routes of the original set,
	// less t03's keys.
	c.Remove("new")
	c.Add("t03", 1)
	if diff := cmp.Diff(before, route(c, keys)); diff != "" {
		t.Errorf("routes after undoing the changes (-before +after):\n%s", diff)
	}
}

func TestConsistentHashBalance(t *testing.T) {
	c := newHash(0, names(10)...)
	c.Add("t00", 3) // three times the points
	counts := map[string]int{}
	for _, tg := range route(c, 60000) {
		counts[tg]++
	}
	// Mean per unit of weight: 60000/12 = 5000.
	for tg, n := range counts {
		want := 5000.0
		if tg == "t00" {
			want = 15000
		}
		if r := float64(n) / want; r < 0.7 || r > 1.3 {
			t.Errorf("%s got %d keys, want %.0f ± 30%%", tg, n, want)
		}
	}
}

// TestConsistentHashLookup checks the index lookup against a binary
// search over the circle.
func TestConsistentHashLookup(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{1, 2, 7, 100} {
		c := newHash(1+rng.IntN(30), names(n)...)
		c.Pick("", nil)
		circ := c.circle.Load()
		for i := range 5000 {
			k := fmt.Sprint(rng.Uint64(), i)
			h := keyHash(k)
			j := sort.Search(len(circ.points), func(j int) bool { return circ.points[j].hash >= h })
			if j == len(circ.points) {
				j = 0
			}
			got, _ := c.Pick(k, nil)
			if want := circ.points[j].owner.target; got != want {
				t.Fatalf("%d targets: key %q: Pick = %s, binary search %s", n, k, got, want)
			}
		}
		if !slices.IsSortedFunc(circ.points, comparePoints[string]) {
			t.Errorf("%d targets: points not sorted", n)
		}
	}
}

// TestConsistentHashSkip checks a skipped owner hands its keys to others,
// the same way every time, and leaves other keys alone.
func TestConsistentHashSkip(t *testing.T) {
	c := newHash(0, names(8)...)
	before := route(c, 3000)
	skip := func(t string) bool { return t == "t02" }
	for round := range 2 {
		for k, t0 := range before {
			got, ok := c.Pick(k, skip)
			if !ok || got == "t02" {
				t.Fatalf("key %s: Pick with t02 skipped = %s, %v", k, got, ok)
			}
			if t0 != "t02" && got != t0 {
				t.Fatalf("key %s moved from %s to %s though only t02 is skipped", k, t0, got)
			}
			// Skipping the owner is the same as removing it.
			if round == 0 && t0 == "t02" {
				d := newHash(0, slices.DeleteFunc(names(8), skip)...)
				if want, _ := d.Pick(k, nil); got != want {
					t.Fatalf("key %s: skipped t02 hands over to %s, removal to %s", k, got, want)
				}
			}
		}
	}
	// Skipping all but one walks past the points to the targets.
	for k := range before {
		if got, ok := c.Pick(k, func(t string) bool { return t != "t05" }); !ok || got != "t05" {
			t.Fatalf("key %s: Pick with only t05 left = %s, %v", k, got, ok)
		}
	}
}

func TestConsistentHashReweight(t *testing.T) {
	c := newHash(10, "a", "b")
	c.Pick("", nil)
	if c.stale.Load() {
		t.Error("circle stale after a Pick")
	}
	if c.Add("a", 1) {
		t.Error("Add of a present target reported true")
	}
	if c.stale.Load() {
		t.Error("Add with the same weight made the circle stale")
	}
	c.Add("a", 4)
	c.Add("b", 500) // capped
	c.Pick("", nil)
	n := map[string]int{}
	for _, p := range c.circle.Load().points {
		n[p.owner.target]++
	}
	if diff := cmp.Diff(map[string]int{"a": 40, "b": 1000}, n); diff != "" {
		t.Errorf("points per target (-want +got):\n%s", diff)
	}
}

// TestNewConsistentHash: NewConsistentHash accepts replicas from 0 (the
// default) to 10,000 and refuses a nil name function and other replicas,
// saying which argument is wrong.
func TestNewConsistentHash(t *testing.T) {
	id := func(s string) string { return s }
	for _, replicas := range []int{0, 1, 100, 10_000} {
		if _, err := NewConsistentHash(id, replicas); err != nil {
			t.Errorf("NewConsistentHash(id, %d): %v", replicas, err)
		}
	}
	tests := []struct {
		name     string
		fn       func(string) string
		replicas int
		want     string
	}{
		{"nil name", nil, 0, "wizard: lb: NewConsistentHash: nil name function"},
		{"negative replicas", id, -1, "wizard: lb: NewConsistentHash: -1 replicas; want 0 for the default (100) or 1 to 10000"},
		{"too many replicas", id, 10_001, "wizard: lb: NewConsistentHash: 10001 replicas; want 0 for the default (100) or 1 to 10000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewConsistentHash(tt.fn, tt.replicas)
			if err == nil {
				t.Fatalf("NewConsistentHash = %v, nil; want an error", c)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}
