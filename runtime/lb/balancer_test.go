package lb

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// balancers makes one of each balancer, for the contract every balancer
// keeps.
var balancers = []struct {
	name string
	new  func() Balancer[string]
}{
	{"Ring", func() Balancer[string] { return NewRing[string]() }},
	{"Random", func() Balancer[string] { return NewRandom[string]() }},
	{"LeastInFlight", func() Balancer[string] { return NewLeastInFlight[string](nil) }},
	{"ConsistentHash", func() Balancer[string] { return mustHash(func(s string) string { return s }, 20) }},
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("t%02d", i)
	}
	return out
}

func TestBalancerEmpty(t *testing.T) {
	for _, bb := range balancers {
		t.Run(bb.name, func(t *testing.T) {
			b := bb.new()
			if got, ok := b.Pick("k", nil); ok {
				t.Errorf("Pick on an empty balancer = %q, true", got)
			}
			if _, ok := b.Pick("k", func(string) bool { t.Error("skip called with no target"); return true }); ok {
				t.Error("Pick with skip on an empty balancer reported a target")
			}
			if b.Remove("x") {
				t.Error("Remove on an empty balancer reported true")
			}
			if b.Len() != 0 {
				t.Errorf("Len = %d", b.Len())
			}
			b.Done("x") // must not panic
		})
	}
}

func TestBalancerAddRemove(t *testing.T) {
	for _, bb := range balancers {
		t.Run(bb.name, func(t *testing.T) {
			b := bb.new()
			all := names(8)
			for i, n := range all {
				if !b.Add(n, i-2) { // weights below 1 are allowed
					t.Fatalf("Add(%q) of a new target reported false", n)
				}
			}
			if b.Add(all[3], 2) {
				t.Error("Add of a present target reported true")
			}
			if b.Len() != len(all) {
				t.Errorf("Len = %d, want %d", b.Len(), len(all))
			}
			gone := map[string]bool{all[0]: true, all[5]: true, all[7]: true}
			for n := range gone {
				if !b.Remove(n) {
					t.Errorf("Remove(%q) reported false", n)
				}
				if b.Remove(n) {
					t.Errorf("second Remove(%q) reported true", n)
				}
			}
			if b.Len() != len(all)-len(gone) {
				t.Errorf("Len after removals = %d, want %d", b.Len(), len(all)-len(gone))
			}
			seen := map[string]bool{}
			for i := range 2000 {
				got, ok := b.Pick(fmt.Sprint("key", i), nil)
				if !ok {
					t.Fatal("Pick failed")
				}
				if gone[got] {
					t.Fatalf("Pick returned removed target %q", got)
				}
				seen[got] = true
				b.Done(got)
			}
			want := slices.DeleteFunc(slices.Clone(all), func(n string) bool { return gone[n] })
			if diff := cmp.Diff(want, slices.Sorted(maps.Keys(seen))); diff != "" {
				t.Errorf("targets picked over 2000 picks (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBalancerSkipContract checks what lets skip take a permit: skip is
// never called after it accepted a target, the accepted target is the one
// returned, a rejected target is never returned, and Pick fails only once
// every target has been offered and rejected.
func TestBalancerSkipContract(t *testing.T) {
	for _, bb := range balancers {
		t.Run(bb.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			b := bb.new()
			all := names(12)
			for _, n := range all {
				b.Add(n, 1+rng.IntN(3))
			}
			for i := range 3000 {
				rejected := map[string]bool{}
				p := rng.Float64()
				if i%10 == 0 {
					p = 1 // every target
				}
				for _, n := range all {
					rejected[n] = rng.Float64() < p
				}
				var offered []string
				accepted := ""
				got, ok := b.Pick(fmt.Sprint("key", rng.IntN(100)), func(n string) bool {
					if accepted != "" {
						t.Fatalf("skip(%q) called after it accepted %q", n, accepted)
					}
					offered = append(offered, n)
					if !rejected[n] {
						accepted = n
					}
					return rejected[n]
				})
				if !ok {
					if accepted != "" {
						t.Fatalf("Pick failed after skip accepted %q", accepted)
					}
					for _, n := range all {
						if !rejected[n] {
							t.Fatalf("Pick failed but %q was not rejected", n)
						}
						if !slices.Contains(offered, n) {
							t.Fatalf("Pick failed without offering %q", n)
						}
					}
					continue
				}
				if got != accepted {
					t.Fatalf("Pick returned %q, skip accepted %q", got, accepted)
				}
				b.Done(got)
			}
		})
	}
}

// TestBalancerConcurrent runs picks and changes at once; run with -race.
func TestBalancerConcurrent(t *testing.T) {
	for _, bb := range balancers {
		t.Run(bb.name, func(t *testing.T) {
			b := bb.new()
			all := names(32)
			for _, n := range all[:16] {
				b.Add(n, 1)
			}
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					for i := range 3000 {
						skip := func(n string) bool { return n == all[g] }
						if got, ok := b.Pick(fmt.Sprint(i), skip); ok {
							if got == all[g] {
								t.Errorf("Pick returned the skipped %q", got)
							}
							b.Done(got)
						}
					}
				})
			}
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(3, 4))
				for range 1000 {
					n := all[rng.IntN(len(all))]
					if rng.IntN(2) == 0 {
						b.Add(n, 1+rng.IntN(3))
					} else {
						b.Remove(n)
					}
					b.Len()
				}
			})
			wg.Wait()
		})
	}
}

func TestBalancerPicksAllocateNothing(t *testing.T) {
	for _, bb := range balancers {
		t.Run(bb.name, func(t *testing.T) {
			b := bb.new()
			for i, n := range names(100) {
				b.Add(n, 1+i%3)
			}
			skip := func(n string) bool { return n == "t01" || n == "t02" }
			b.Pick("warm", skip) // a lazy rebuild may allocate once
			allocs := testing.AllocsPerRun(1000, func() {
				got, _ := b.Pick("some key", nil)
				b.Done(got)
				got, _ = b.Pick("other key", skip)
				b.Done(got)
			})
			if allocs != 0 {
				t.Errorf("%v allocations per two picks, want 0", allocs)
			}
		})
	}
}
