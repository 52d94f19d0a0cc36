package evbench

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/internal/testkit/need"
)

func TestMain(m *testing.M) {
	ServeIfChild() // the events mode's processes are this test binary re-executed
	os.Exit(m.Run())
}

// TestEventsSmoke runs every contender briefly (1 and 2 groups, 1 and 4
// emitters, one run of 150 ms) so that the mode never rots in CI: every
// cell measured, no emit failed, no lossless contender lost an event, the
// targets' rows and the chart written. Moleculer without Node.js is
// reported as not measured, and fails the test when WIZARD_REQUIRE is set
// (CI, which installs bench/moleculer first).
func TestEventsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dozen processes")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	var log bytes.Buffer
	rep, err := Run(ctx, Config{Groups: []int{1, 2}, Members: []int{1}, Emitters: []int{1, 4}, Runs: 1,
		Warmup: 50 * time.Millisecond, Duration: 150 * time.Millisecond, Log: &log, Command: "go test"})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, log.String())
	}
	measured := map[string]bool{}
	for _, c := range rep.Measured {
		measured[c.name] = true
	}
	for _, c := range contenders {
		if measured[c.name] {
			continue
		}
		found := false
		for _, g := range rep.Gaps {
			found = found || g[0] == c.title
		}
		if !found {
			t.Errorf("%s neither measured nor reported as not measured", c.title)
		}
		if c.node && need.Required() {
			t.Errorf("%s not measured with WIZARD_REQUIRE set", c.title)
		}
	}
	if want := len(rep.Measured) * 2 * 2; len(rep.Cells) != want {
		t.Fatalf("%d cells; want %d", len(rep.Cells), want)
	}
	for _, c := range rep.Cells {
		if c.EventsPerSec <= 0 || c.P99 <= 0 || c.P99 < c.P50 {
			t.Errorf("%s %d groups %d emitters: %.0f events/s, p50 %v p99 %v", c.Title, c.Groups, c.Emitters, c.EventsPerSec, c.P50, c.P99)
		}
		report := t.Errorf
		if c.Name == "wizard-mesh-noreply" {
			// Fire and forget is at most once: a member flooded past its
			// connection's ping loses events by design (see the README).
			report = t.Logf
		}
		if c.Errors > 0 {
			report("%s %d groups %d emitters: %d emits failed: %s", c.Title, c.Groups, c.Emitters, c.Errors, c.FirstErr)
		}
		if cc, _ := contenderOf(c.Name); c.Lost > 0 && !cc.lossy {
			report("%s %d groups %d emitters: %d events lost", c.Title, c.Groups, c.Emitters, c.Lost)
		}
	}
	var md, svg bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	if measured["moleculer"] && !strings.Contains(md.String(), "| wizard mesh ≥ 2x Moleculer emit's events/s | 2 × 1 | 4 |") {
		t.Errorf("no target row for 2 groups, 4 emitters:\n%s", md.String())
	}
	for _, want := range []string{"| wizard durable ≥ 0.8x nats.go JetStream's events/s |", "| wizard durable, AtLeastOnce ≥ 0.8x nats.go JetStream's events/s |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("no target row %q:\n%s", want, md.String())
		}
	}
	if !strings.HasPrefix(svg.String(), "<svg") || !strings.Contains(svg.String(), "wizard mesh") {
		t.Errorf("chart: %.200s", svg.String())
	}
}

// TestNamedGapFails: a contender that cannot run, asked for by name,
// fails the run with the reason instead of being left out.
func TestNamedGapFails(t *testing.T) {
	for _, c := range contenders {
		if c.gap == "" {
			continue
		}
		_, err := Run(t.Context(), Config{Contenders: []string{c.name}, Groups: []int{1}, Emitters: []int{1}})
		if err == nil || !strings.Contains(err.Error(), c.name) || !strings.Contains(err.Error(), c.gap) {
			t.Errorf("Run(%s) = %v; want the contender's gap", c.name, err)
		}
	}
	if _, err := Run(t.Context(), Config{Contenders: []string{"nope"}, Groups: []int{1}, Emitters: []int{1}}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("Run(nope) = %v; want an error naming it", err)
	}
}

func TestHistQuantiles(t *testing.T) {
	var r recorder
	now := time.Now().UnixNano()
	// 99 events of about 100 µs and one of about 10 ms.
	for range 99 {
		r.buckets[bucketOf(100_000)].Add(1)
	}
	r.buckets[bucketOf(10_000_000)].Add(1)
	r.total.Add(100)
	r.got(now) // one more, of a few µs at most
	var h hist
	if err := h.add(r.snap()); err != nil {
		t.Fatal(err)
	}
	if h.n != 101 {
		t.Fatalf("n = %d; want 101", h.n)
	}
	near := func(got time.Duration, want float64) bool {
		return float64(got) >= want/1.05 && float64(got) <= want*1.05
	}
	if p := h.quantile(0.5); !near(p, 100_000) {
		t.Errorf("p50 = %v; want 100µs within 5%%", p)
	}
	if p := h.quantile(1); !near(p, 10_000_000) {
		t.Errorf("p100 = %v; want 10ms within 5%%", p)
	}
	if s := r.snap(); s != "0 -" {
		t.Errorf("second snap = %q; want empty", s)
	}
	if err := h.add("3 1:1"); err == nil {
		t.Error("a snap whose buckets do not sum to N was taken")
	}
}
