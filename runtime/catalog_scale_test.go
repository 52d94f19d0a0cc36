package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// catalogOf encodes a catalog of n patterns, each of two keys; set tells
// catalogs of the same size apart.
func catalogOf(t testing.TB, set string, n int) []byte {
	c := catalog{ID: "peer", Patterns: make([]string, n)}
	for i := range c.Patterns {
		c.Patterns[i] = fmt.Sprintf("role:%s%d,cmd:get", set, i)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCatalog_Linear bounds the cost of taking a peer's catalog into
// routing, decoding included: with catalogs of 16,000 patterns replacing
// each other, the time per pattern is at most 8 times that with catalogs
// of 250. Comparing every old pattern with every new one costs 64 times
// as much per pattern. Timed as TestParsePattern_Linear is.
func TestCatalog_Linear(t *testing.T) {
	n, err := New(WithTransport(newMemNet()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	p := &peer{addr: "peer", ctx: context.Background()}
	p.node, p.target.p = n, p
	// load decodes a catalog and routes it in place of the one before.
	load := func(b []byte) {
		_, pats, err := decodeCatalog(b, &n.limits)
		if err != nil {
			t.Fatal(err)
		}
		n.setCatalog(p, pats)
	}
	const small, big = 250, 16000
	cats := map[int][2][]byte{}
	for _, size := range []int{small, big} {
		cats[size] = [2][]byte{catalogOf(t, "a", size), catalogOf(t, "b", size)}
	}
	timeLoads := func(size, reps int) time.Duration {
		runtime.GC()
		start := time.Now()
		for range reps {
			load(cats[size][0])
			load(cats[size][1]) // every pattern changes
		}
		return time.Since(start)
	}
	var tSmall, tBig time.Duration
	deadline := time.Now().Add(20 * time.Second)
	// Three rounds, the best of each size kept; more while the bound is
	// missed, so that one round descheduled on a loaded machine does not
	// fail the test (quadratic work misses it in every round).
	for i := 0; i < 12 && time.Now().Before(deadline) && (i < 3 || tBig > 8*tSmall); i++ {
		s, b := timeLoads(small, big/small), timeLoads(big, 1)
		if i == 0 || s < tSmall {
			tSmall = s
		}
		if i == 0 || b < tBig {
			tBig = b
		}
	}
	n.setCatalog(p, nil)
	ratio := float64(tBig) / float64(tSmall)
	t.Logf("per pattern: %v with catalogs of %d, %v with catalogs of %d (ratio %.2f)", tSmall/(2*big), small, tBig/(2*big), big, ratio)
	if ratio > 8 {
		t.Errorf("catalogs of %d patterns cost %.1f times as much per pattern as catalogs of %d; want at most 8", big, ratio, small)
	}
}
