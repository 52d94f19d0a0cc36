package lb

import (
	"sync"
	"sync/atomic"
	"testing"
)

// With two targets the two choices are always both targets, so the
// balancer is exact: picks without Done alternate by load.
func TestLeastInFlightTwoTargets(t *testing.T) {
	tests := []struct {
		name   string
		wa, wb int
		picks  int
		a, b   int // in flight after the picks
	}{
		{"equal", 1, 1, 100, 50, 50},
		{"weights 1 and 3", 1, 3, 100, 25, 75},
		{"weights 2 and 3", 2, 3, 50, 20, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewLeastInFlight[string](nil)
			b.Add("a", tt.wa)
			b.Add("b", tt.wb)
			for range tt.picks {
				if _, ok := b.Pick("", nil); !ok {
					t.Fatal("Pick failed")
				}
			}
			// Ties go either way, so allow one call of slack.
			if a, bb := b.InFlight("a"), b.InFlight("b"); abs(a-tt.a) > 1 || a+bb != tt.picks {
				t.Errorf("in flight a=%d b=%d, want a=%d±1 b=%d", a, bb, tt.a, tt.picks-tt.a)
			}
		})
	}
}

func abs(x int) int { return max(x, -x) }

func TestLeastInFlightDone(t *testing.T) {
	b := NewLeastInFlight[string](nil)
	b.Add("a", 1)
	b.Add("b", 1)
	// Every call to a finishes at once, calls to b pile up: a gets the
	// traffic.
	counts := map[string]int{}
	for range 100 {
		tg, _ := b.Pick("", nil)
		counts[tg]++
		if tg == "a" {
			b.Done(tg)
		}
	}
	if counts["b"] > 1 {
		t.Errorf("the slow target got %d of 100 calls, want at most 1", counts["b"])
	}
	for range 5 {
		b.Done("a") // more Done than calls
	}
	if got := b.InFlight("a"); got != 0 {
		t.Errorf("InFlight(a) after extra Done = %d, want 0", got)
	}
	b.Done("nobody")
	b.Remove("b")
	b.Done("b")
	if got := b.InFlight("b"); got != 0 {
		t.Errorf("InFlight of a removed target = %d", got)
	}
}

func TestLeastInFlightLoadFunc(t *testing.T) {
	loads := map[string]int{"a": 10, "b": 2, "c": 7}
	b := NewLeastInFlight(func(t string) int { return loads[t] })
	for tg := range loads {
		b.Add(tg, 1)
	}
	counts := map[string]int{}
	for range 3000 {
		tg, _ := b.Pick("", nil)
		counts[tg]++
		b.Done(tg)
	}
	// a is never the lighter of a pair; b always is when drawn (2/3 of
	// picks); c wins against a only (1/3).
	if counts["a"] != 0 {
		t.Errorf("the most loaded target got %d picks", counts["a"])
	}
	if counts["b"] < 1800 || counts["b"] > 2200 {
		t.Errorf("the least loaded target got %d of 3000 picks, want about 2000", counts["b"])
	}
	if got := b.InFlight("b"); got != 2 {
		t.Errorf("InFlight(b) = %d, want the load function's 2", got)
	}
}

// TestLeastInFlightSpread checks that under concurrent calls, load stays
// even across many targets.
func TestLeastInFlightSpread(t *testing.T) {
	b := NewLeastInFlight[int](nil)
	const n = 20
	for i := range n {
		b.Add(i, 1)
	}
	var most atomic.Int64 // the most calls seen in flight to one target
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 2000 {
				tg, _ := b.Pick("", nil)
				f := int64(b.InFlight(tg))
				for m := most.Load(); f > m && !most.CompareAndSwap(m, f); m = most.Load() {
				}
				b.Done(tg)
			}
		})
	}
	wg.Wait()
	// 8 callers over 20 targets. 8 callers can never put more than 8 calls
	// on one target, so the bound must be lower to test anything: a target
	// with k calls gets one more only when the other target drawn has k or
	// more, and the other callers hold at most 7, so k+1 <= 4.
	if m := most.Load(); m > 4 {
		t.Errorf("a target held %d calls at once", m)
	}
	for i := range n {
		if f := b.InFlight(i); f != 0 {
			t.Errorf("target %d has %d calls in flight after all are done", i, f)
		}
	}
}
