package main

import (
	goruntime "runtime"
	"runtime/metrics"
)

// gcFloor is the least heap goal the gateway keeps while GOGC is not set:
// 16 MiB. With the default GOGC of 100 the goal is twice the live heap,
// at least 4 MiB, and a gateway's live heap under HTTP load is a few
// MiB: the collector then runs every few thousand requests, each cycle
// scanning every connection's goroutine stack, a large share of a
// request's cost. A heap goal of 16 MiB runs it a quarter as often. With
// a live heap of 8 MiB or more the goal is GOGC's own.
const gcFloor = 16 << 20

// gcPercentCap bounds the GOGC the floor sets, for a nearly empty heap.
const gcPercentCap = 1000

// gcPercentFor returns the GOGC that makes the heap goal (live × (1 +
// GOGC/100)) at least floor, and never less than 100.
func gcPercentFor(live, floor uint64) int {
	if live == 0 || 2*live >= floor {
		return 100
	}
	return min(int((floor-live)*100/live), gcPercentCap)
}

// keepGCFloor sets GOGC after every collection so that the heap goal
// stays at least floor; set is debug.SetGCPercent (a test's own set
// sees each value). It does nothing when the environment sets GOGC:
// the operator's choice stands. GOMEMLIMIT bounds the heap either way.
func keepGCFloor(getenv func(string) string, floor uint64, set func(int) int) {
	if getenv("GOGC") != "" {
		return
	}
	g := &gcTuner{floor: floor, set: set, cur: 100, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	g.arm()
}

// gcTuner re-arms a finalizer on a new sentinel after every collection:
// the finalizer runs once the cycle that found its sentinel unreachable
// has ended, when the live heap it marked is known.
type gcTuner struct {
	floor  uint64
	set    func(int) int
	cur    int
	sample []metrics.Sample
}

// gcSentinel holds a pointer so that it is not a tiny allocation (which
// shares a block with others and may outlive its cycle).
type gcSentinel struct{ _ *int }

func (g *gcTuner) arm() {
	goruntime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		g.tune()
		g.arm()
	})
}

func (g *gcTuner) tune() {
	metrics.Read(g.sample)
	if g.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	if p := gcPercentFor(g.sample[0].Value.Uint64(), g.floor); p != g.cur {
		g.cur = p
		g.set(p)
	}
}
