package gwbench

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/internal/testkit/need"
)

func TestMain(m *testing.M) {
	ServeIfChild() // the test binary is re-executed as the echo and grpc processes
	os.Exit(m.Run())
}

// TestRunSmoke runs a tiny version of everything: every pass of
// pathfinder's ramp against the real wizard-gateway binary (10 clients in
// 5 stages, WebSocket and HTTP, with and without HS256 and ES256 tokens
// the gateway verifies), and every contender of the comparison at 1 and 4
// connections; no call may fail, every figure must be sane, and the
// report and chart must hold every row. moleculer-web may be a gap (no
// Node.js), which the report must then name; WIZARD_REQUIRE=1 makes it a
// failure.
func TestRunSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds wizard-gateway and starts every contender's processes; not in -short")
	}
	levels := []int{1, 4}
	cfg := Config{
		Ramp:     RampConfig{Clients: 10, Stages: 5, Stage: 200 * time.Millisecond, Rounds: 2},
		Levels:   levels,
		Runs:     2,
		Warmup:   100 * time.Millisecond,
		Duration: 200 * time.Millisecond,
		Command:  "go test",
	}
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Ramps) != 2*len(Scenarios) {
		t.Fatalf("%d ramp passes, want %d", len(rep.Ramps), 2*len(Scenarios))
	}
	// The tables' order: round 1's passes in Scenarios' order, then
	// round 2's; round 2 ran them in reverse.
	n := len(Scenarios)
	for i, r := range rep.Ramps {
		round, sc := i/n+1, Scenarios[i%n]
		seq := i%n + 1
		if round == 2 {
			seq = n + (n - i%n)
		}
		if r.Round != round || r.Scenario != sc || r.Seq != seq {
			t.Errorf("pass %d: %s, round %d, ran %d; want %s, round %d, ran %d", i, r.Scenario.Title(), r.Round, r.Seq, sc.Title(), round, seq)
		}
	}
	for _, r := range rep.Ramps {
		o := r.Overall
		if o.Errors > 0 || o.Calls == 0 || o.P50 <= 0 || o.P99 < o.P50 {
			t.Errorf("%s: %d calls, %d errors (first: %s), p50 %v, p99 %v", r.Scenario.Title(), o.Calls, o.Errors, o.FirstErr, o.P50, o.P99)
		}
		if len(r.Stages) != cfg.Ramp.Stages || r.lastStage().Clients != cfg.Ramp.Clients {
			t.Errorf("%s: %d stages, the last with %d clients", r.Scenario.Title(), len(r.Stages), r.lastStage().Clients)
		}
		if r.Res.StartRSS <= 0 || r.Res.MaxRSS < r.Res.StartRSS || r.Res.AvgCPU < 0 {
			t.Errorf("%s: insane resources %+v", r.Scenario.Title(), r.Res)
		}
	}
	want := map[string]bool{WizardGateway: true, MoleculerWeb: true, GRPCGateway: true}
	for _, g := range rep.Gaps {
		if need.Required() {
			t.Errorf("%s not measured: %s", g.Contender, g.Reason)
		} else {
			t.Logf("%s not measured: %s", g.Contender, g.Reason)
		}
		delete(want, g.Contender)
	}
	bars := 0
	for _, n := range levels {
		for name := range want {
			c, ok := rep.cell(name, n)
			if !ok {
				t.Errorf("no cell for %s at %d connections", name, n)
				continue
			}
			bars++
			if c.Errors > 0 || c.PerSec <= 0 || c.P50 <= 0 || c.P99 < c.P50 {
				t.Errorf("%s, %d connections: %.0f req/s, p50 %v, p99 %v, %d errors (first: %s)", name, n, c.PerSec, c.P50, c.P99, c.Errors, c.FirstErr)
			}
		}
	}
	if c, ok := rep.cell(WizardDirect, 1); !ok {
		t.Error("no cell for the direct wizard call at 1 connection")
	} else {
		bars++
		if c.Errors > 0 || c.PerSec <= 0 || c.P50 <= 0 || c.P99 < c.P50 {
			t.Errorf("%s, 1 connection: %.0f req/s, p50 %v, p99 %v, %d errors (first: %s)", WizardDirect, c.PerSec, c.P50, c.P99, c.Errors, c.FirstErr)
		}
	}

	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"| Requests / sec | 162.723 | 53.357 |", "| 99th percentile | 12968 ms | 38587 ms |", "## Targets of issue 14",
		"| 2 | HTTP keep-alive, JWT ES256 over HTTP keep-alive, no token |", "| 4 | grpc-gateway | ", "CPU per call, per run"} {
		if !strings.Contains(md.String(), s) {
			t.Errorf("the report has no %q", s)
		}
	}
	for _, r := range rep.Ramps {
		if !strings.Contains(md.String(), "wizard, "+r.Label()+" |") {
			t.Errorf("the report has no column for %s", r.Label())
		}
	}
	for _, g := range rep.Gaps {
		if !strings.Contains(md.String(), "Not measured: "+g.Contender) {
			t.Errorf("the report does not name the gap %s", g.Contender)
		}
	}
	var svg bytes.Buffer
	if err := rep.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, svg.Bytes(), "rect", "bar", bars)
	svg.Reset()
	if err := rep.WriteRampSVG(&svg); err != nil {
		t.Fatal(err)
	}
	// A point per stage that measured calls: a stage is a stretch of time
	// (clients join on the clock, as in pathfinder's scenario), and on a
	// loaded machine no call of a 200 ms stage's few clients may end in it.
	// The last one always has calls: it takes every call that ends after it.
	points := 0
	for _, r := range rep.Ramps {
		for _, s := range r.Stages {
			if s.Calls > 0 {
				points++
			}
		}
		if r.lastStage().Calls == 0 {
			t.Errorf("%s: no call in the last stage", r.Scenario.Title())
		}
	}
	checkSVG(t, svg.Bytes(), "circle", "point", points)
}

// checkSVG checks that a chart is well-formed XML with bars elements
// elem of class class.
func checkSVG(t *testing.T, b []byte, elem, class string, bars int) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	got := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == elem {
			for _, a := range se.Attr {
				if a.Name.Local == "class" && a.Value == class {
					got++
				}
			}
		}
	}
	if got != bars {
		t.Errorf("the chart has %d %s.%s, want %d", got, elem, class, bars)
	}
}

// TestProfileSmoke runs a tiny WebSocket ramp against the profiled
// gateway and checks that its profiles are written.
func TestProfileSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the echo and gateway processes; not in -short")
	}
	dir := t.TempDir()
	cfg := Config{Ramp: RampConfig{Clients: 5, Stages: 5, Stage: 200 * time.Millisecond}, Scenarios: []string{"ws-hs256"}, ProfileDir: dir,
		Levels: []int{2}, Contenders: []string{WizardGateway, GRPCGateway}, Runs: 1, Warmup: 50 * time.Millisecond, Duration: 100 * time.Millisecond}
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Ramps) != 1 || rep.Ramps[0].Overall.Errors > 0 || rep.Ramps[0].Overall.Calls == 0 {
		t.Fatalf("ramp: %+v", rep.Ramps)
	}
	for _, f := range []string{"cpu.pprof", "heap.pprof", "goroutines.txt", "memstats.txt"} {
		st, err := os.Stat(filepath.Join(dir, "wizard-gateway-ws-hs256", f))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s: %v, %v", f, st, err)
		}
	}
	// The comparison's gateways, side by side.
	for _, d := range []string{"wizard-gateway-compare", "grpc-gateway"} {
		st, err := os.Stat(filepath.Join(dir, d, "cpu.pprof"))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s/cpu.pprof: %v, %v", d, st, err)
		}
	}
}
