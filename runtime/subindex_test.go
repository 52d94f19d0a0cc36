package runtime

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/wizardmesh/wizard/runtime/internal/patrun"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// TestSubIndexMatchesEveryOne: the index finds exactly the subscriptions
// that testing each one finds, in their order, for random subscriptions
// (exact values, globs, the catch-all, the same pattern twice) and
// random events.
func TestSubIndexMatchesEveryOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"a", "b", "c", "d", "e"}
	values := []string{"1", "2", "3"}
	globs := []string{"*", "1*", "?", "[", "2?"}
	randomPattern := func(glob bool) pattern.Pattern {
		var pairs []pattern.Pair
		for _, k := range keys {
			switch rng.IntN(3) {
			case 0:
				v := values[rng.IntN(len(values))]
				if glob && rng.IntN(4) == 0 {
					v = globs[rng.IntN(len(globs))]
				}
				pairs = append(pairs, pattern.Pair{Key: k, Value: v})
			}
		}
		return patrun.New(pairs)
	}
	for round := range 200 {
		subs := make([]pattern.Pattern, rng.IntN(40))
		for i := range subs {
			subs[i] = randomPattern(true)
			if i > 0 && rng.IntN(10) == 0 {
				subs[i] = subs[rng.IntN(i)] // the same pattern in another group
			}
		}
		x := newSubIndex(subs, func(p pattern.Pattern) pattern.Pattern { return p })
		for range 50 {
			ev := patrun.PairsOf(randomPattern(false))
			var want []int
			for i, s := range subs {
				if patrun.Matches(s, ev) {
					want = append(want, i)
				}
			}
			got := x.match(ev, nil)
			if !slices.Equal(got, want) {
				t.Fatalf("round %d: event %v matched %v, want %v (subscriptions %v)", round, ev, got, want, subs)
			}
		}
	}
}

// TestSubIndexKeepsBuf: match appends after what buf holds, and sorts only
// what it appended.
func TestSubIndexKeepsBuf(t *testing.T) {
	subs := []pattern.Pattern{patrun.MustParse("a:1"), patrun.MustParse(""), patrun.MustParse("a:1,b:2")}
	x := newSubIndex(subs, func(p pattern.Pattern) pattern.Pattern { return p })
	got := x.match(patrun.PairsOf(patrun.MustParse("a:1,b:2")), []int{9, 7})
	if want := []int{9, 7, 0, 1, 2}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	var nilIndex *subIndex[pattern.Pattern]
	if got := nilIndex.match(nil, []int{4}); !slices.Equal(got, []int{4}) {
		t.Fatalf("a nil index: %v", got)
	}
}

// BenchmarkSubIndex: an event of one user's among n users' subscriptions,
// through the index and by testing each subscription.
func BenchmarkSubIndex(b *testing.B) {
	for _, n := range []int{10, 1000} {
		subs := make([]pattern.Pattern, n)
		for i := range subs {
			subs[i] = patrun.MustParse(fmt.Sprintf("role:gw,event:mine,user:%d", i))
		}
		ev := patrun.PairsOf(patrun.MustParse(fmt.Sprintf("role:gw,event:mine,user:%d,seq:5", n/2)))
		x := newSubIndex(subs, func(p pattern.Pattern) pattern.Pattern { return p })
		b.Run(fmt.Sprintf("index/%d", n), func(b *testing.B) {
			var buf [16]int
			for b.Loop() {
				if len(x.match(ev, buf[:0])) != 1 {
					b.Fatal("no match")
				}
			}
		})
		b.Run(fmt.Sprintf("each/%d", n), func(b *testing.B) {
			for b.Loop() {
				m := 0
				for _, s := range subs {
					if patrun.Matches(s, ev) {
						m++
					}
				}
				if m != 1 {
					b.Fatal("no match")
				}
			}
		})
	}
}
