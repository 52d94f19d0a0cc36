package harness

import (
	"testing"
	"time"
)

// TestTargets checks the target rows against a made-up report: a
// paired target is met only if every pair of runs meets it, and its
// figure is the median of the pairs' ratios with their range.
func TestTargets(t *testing.T) {
	runs := func(rates ...float64) []Sample {
		s := make([]Sample, len(rates))
		for i, r := range rates {
			s[i] = Sample{PerSec: r}
		}
		return s
	}
	cell := func(name string, callers int, perSec float64, p50 time.Duration, rs []Sample) Cell {
		return Cell{Name: name, Callers: callers, PerSec: perSec, P50: p50, Runs: rs}
	}
	r := &Report{
		Cells: []Cell{
			cell("wizard-tcp", 1, 30, 40*time.Microsecond, runs(30, 31, 16)),
			cell("microwizard-node", 1, 10, 0, runs(10, 10, 10)),
			cell(floorName, 1, 40, 36*time.Microsecond, nil),
			cell("wizard-tcp", 16, 60, 0, runs(60, 61, 62)),
			cell("microwizard-node", 16, 30, 0, runs(30, 30, 30)),
			cell("wizard-tcp", 128, 65, 0, nil),
			cell(floorName, 128, 100, 0, nil),
			cell("wizard-tcp", 1024, 60, 0, nil),
			cell(floorName, 1024, 100, 0, nil),
		},
		Hops: []Cell{
			{Name: sleepName, P50: 10 * time.Millisecond},
			{Name: "wizard-tcp", P50: 11300 * time.Microsecond},
			{Name: floorName, P50: 11 * time.Millisecond},
		},
	}
	want := map[string]target{
		"1 caller: wizard TCP vs MicroWizard → MicroWizard, req/s ≥ 1.5x in every paired run": {measured: "3.00x (3 runs: 1.60x–3.10x)", met: "yes"},
		"16 callers: wizard TCP vs MicroWizard → MicroWizard, req/s ≥ 2x in every paired run": {measured: "2.03x (3 runs: 2.00x–2.07x)", met: "yes"},
		"1 caller: wizard TCP p50 ≤ 1.15x the floor's":                                        {measured: "1.11x (40.0 µs / 36.0 µs)", met: "yes"},
		"128 callers: wizard TCP req/s ≥ 0.65x the floor's":                                   {measured: "0.65x", met: "yes"},
		"1,024 callers: wizard TCP req/s ≥ 0.55x the floor's":                                 {measured: "0.60x", met: "yes"},
		"wizard TCP: no drop in req/s from 128 to 1,024 callers":                              {measured: "65 → 60", met: "no"},
		"128 callers: wizard QUIC req/s ≥ 0.45x the TCP floor's":                              {measured: "not measured", met: "—"},
		"two hops: wizard TCP's p50 above the timer alone ≤ 1.3x the floor's":                 {measured: "1.30x (1.30 ms / 1.00 ms)", met: "yes"},
	}
	got := map[string]target{}
	for _, tg := range r.targets() {
		got[tg.what] = tg
	}
	for what, w := range want {
		g, ok := got[what]
		if !ok {
			t.Errorf("no target %q", what)
			continue
		}
		if g.measured != w.measured || g.met != w.met {
			t.Errorf("%s: %q, met %q; want %q, met %q", what, g.measured, g.met, w.measured, w.met)
		}
	}
	// One pair below the bar fails a paired target.
	r.Cells[0].Runs = runs(30, 31, 14)
	for _, tg := range r.targets() {
		if tg.what == "1 caller: wizard TCP vs MicroWizard → MicroWizard, req/s ≥ 1.5x in every paired run" && tg.met != "no" {
			t.Errorf("with a pair at 1.4x: met %q, measured %q", tg.met, tg.measured)
		}
	}
}
