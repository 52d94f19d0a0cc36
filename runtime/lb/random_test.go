package lb

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestRandomAliasTable checks the alias table exactly: the probability of
// each target, summed over the column it owns and the columns that alias
// to it, is its weight over the total.
func TestRandomAliasTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 200 {
		n := 1 + rng.IntN(50)
		r := NewRandom[int]()
		weights := make([]int, n)
		for i := range n {
			weights[i] = 1 + rng.IntN(1+rng.IntN(1000))
			r.Add(i, weights[i])
		}
		// Removals exercise the swap that keeps targets dense.
		for range rng.IntN(n) {
			i := rng.IntN(n)
			if r.Remove(i) {
				weights[i] = 0
			}
		}
		tab := r.table.Load()
		if tab.prob == nil {
			continue // uniform
		}
		cols := uint64(len(tab.targets))
		// mass[i] counts in units of 1/(cols*total).
		mass := map[int]uint64{}
		for c := range tab.targets {
			if tab.prob[c] > tab.total {
				t.Fatalf("round %d: prob[%d] = %d above total %d", round, c, tab.prob[c], tab.total)
			}
			mass[tab.targets[c]] += tab.prob[c]
			mass[tab.targets[tab.alias[c]]] += tab.total - tab.prob[c]
		}
		var total uint64
		for _, w := range weights {
			total += uint64(w)
		}
		for i, w := range weights {
			if got, want := mass[i], uint64(w)*cols; got != want {
				t.Errorf("round %d: target %d (weight %d of %d) has mass %d/%d, want %d", round, i, w, total, got, cols*total, want)
			}
		}
	}
}

// TestRandomDistribution checks picks follow the weights, within six
// standard deviations.
func TestRandomDistribution(t *testing.T) {
	for _, weights := range [][]int{{1, 1, 1, 1}, {1, 2, 3, 4}, {1, 100}, {5}} {
		t.Run(fmt.Sprint(weights), func(t *testing.T) {
			r := NewRandom[int]()
			total := 0
			for i, w := range weights {
				r.Add(i, w)
				total += w
			}
			const picks = 200000
			counts := make([]int, len(weights))
			for range picks {
				i, _ := r.Pick("", nil)
				counts[i]++
			}
			for i, w := range weights {
				p := float64(w) / float64(total)
				want := p * picks
				sd := math.Sqrt(picks * p * (1 - p))
				if math.Abs(float64(counts[i])-want) > 6*sd+1 {
					t.Errorf("target %d (weight %d): %d picks, want %.0f ± %.0f", i, w, counts[i], want, 6*sd)
				}
			}
		})
	}
}

func TestRandomReweight(t *testing.T) {
	r := NewRandom[string]()
	r.Add("a", 1)
	r.Add("b", 1)
	if r.table.Load().prob != nil {
		t.Error("equal weights built an alias table")
	}
	r.Add("b", 3)
	if r.table.Load().prob == nil {
		t.Error("unequal weights did not build an alias table")
	}
	counts := map[string]int{}
	for range 40000 {
		tg, _ := r.Pick("", nil)
		counts[tg]++
	}
	if got := float64(counts["b"]) / float64(counts["a"]); got < 2.7 || got > 3.3 {
		t.Errorf("b/a pick ratio = %.2f, want about 3", got)
	}
}
