package main

import (
	goruntime "runtime"
	"testing"
	"time"
)

// TestGCPercentFor: the GOGC that keeps the heap goal at the floor, never
// under 100, at most gcPercentCap.
func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 100},                  // nothing known yet: GOGC's default
		{2 * mib, 700},            // 2 MiB live: a goal of 16
		{4 * mib, 300},            // 4: 16
		{8 * mib, 100},            // 8: twice it is the floor
		{26 * mib, 100},           // 1,000 WebSocket connections: GOGC's own
		{mib / 100, gcPercentCap}, // nearly empty: capped
	} {
		if got := gcPercentFor(c.live, 16*mib); got != c.want {
			t.Errorf("gcPercentFor(%d, 16 MiB) = %d, want %d", c.live, got, c.want)
		}
	}
}

// TestKeepGCFloor: after a collection the tuner sets the GOGC of the live
// heap it marked (here under a floor far above it: the cap); with GOGC
// in the environment it sets nothing.
func TestKeepGCFloor(t *testing.T) {
	none := make(chan int, 1)
	keepGCFloor(func(k string) string {
		if k == "GOGC" {
			return "100"
		}
		return ""
	}, 1<<40, func(p int) int { none <- p; return 0 })
	got := make(chan int, 1)
	keepGCFloor(func(string) string { return "" }, 1<<40, func(p int) int {
		select {
		case got <- p:
		default:
		}
		return 0
	})
	deadline := time.After(guard)
	for {
		goruntime.GC()
		select {
		case p := <-got:
			if p != gcPercentCap {
				t.Errorf("set GOGC %d under a floor of 1 TiB, want %d", p, gcPercentCap)
			}
			select {
			case p := <-none:
				t.Errorf("with GOGC set, the tuner set %d", p)
			default:
			}
			return
		case <-deadline:
			t.Fatal("no GOGC set after collections")
		case <-time.After(10 * time.Millisecond): // collect again: the finalizer runs after a cycle
		}
	}
}
