package microwizard_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/microwizard"
)

// TestFigures measures req/s of role:math,cmd:sum at 1 and 128 callers
// for Go caller → MicroWizard server, MicroWizard caller → Go server and
// MicroWizard → MicroWizard, the three alternated in each of
// WIZARD_BRIDGE_ROUNDS rounds (default 3) of WIZARD_BRIDGE_MS each
// (default 2000), and logs the medians. Behind WIZARD_BRIDGE_FIGURES=1:
//
//	WIZARD_BRIDGE_FIGURES=1 go test ./runtime/microwizard -run TestFigures -v
func TestFigures(t *testing.T) {
	if os.Getenv("WIZARD_BRIDGE_FIGURES") != "1" {
		t.Skip("figures: set WIZARD_BRIDGE_FIGURES=1")
	}
	needNode(t, "microwizard")
	rounds, ms := envInt("WIZARD_BRIDGE_ROUNDS", 3), envInt("WIZARD_BRIDGE_MS", 2000)
	mwAddr := startServer(t, "node")
	goServer := newNode(t, newTransport(t))
	mustAdd(t, goServer, "role:math,cmd:sum", func(ctx context.Context, req runtime.Request) (any, error) {
		a, _ := req.Float64("a")
		b, _ := req.Float64("b")
		return map[string]any{"answer": a + b, "by": "go"}, nil
	})
	tr := newTransport(t, microwizard.WithPeer(mwAddr, "role:math,cmd:sum"))
	caller := callerNode(t, tr, "role:math,cmd:sum")
	d := time.Duration(ms) * time.Millisecond
	type key struct {
		what    string
		callers int
	}
	got := map[key][]float64{}
	for round := range rounds {
		for _, c := range []int{1, 128} {
			got[key{"go→mw", c}] = append(got[key{"go→mw", c}], goLoad(t, caller, c, d))
			got[key{"mw→go", c}] = append(got[key{"mw→go", c}], nodeLoad(t, goServer.Addr(), c, ms))
			got[key{"mw→mw", c}] = append(got[key{"mw→mw", c}], nodeLoad(t, mwAddr, c, ms))
		}
		t.Logf("round %d done", round+1)
	}
	for _, w := range []string{"go→mw", "mw→go", "mw→mw"} {
		for _, c := range []int{1, 128} {
			v := got[key{w, c}]
			slices.Sort(v)
			t.Logf("%s  %3d callers: median %8.0f req/s  (runs %v)", w, c, v[len(v)/2], fmtAll(v))
		}
	}
}

func fmtAll(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(s, " ")
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}

// goLoad runs callers goroutines acting on role:math,cmd:sum for d after
// a 300 ms warm-up, and returns the calls per second.
func goLoad(t *testing.T, n *runtime.Node, callers int, d time.Duration) float64 {
	t.Helper()
	var calls, errs atomic.Int64
	run := func(until time.Time, count bool) {
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				msg := map[string]any{"a": 1, "b": 2}
				for time.Now().Before(until) {
					if _, err := n.Act(context.Background(), "role:math,cmd:sum", msg); err != nil {
						errs.Add(1)
					} else if count {
						calls.Add(1)
					}
				}
			})
		}
		wg.Wait()
	}
	run(time.Now().Add(300*time.Millisecond), false)
	start := time.Now()
	run(start.Add(d), true)
	if e := errs.Load(); e > 0 {
		t.Errorf("go→mw: %d calls failed", e)
	}
	return float64(calls.Load()) / time.Since(start).Seconds()
}

// nodeLoad runs mw-load.mjs against addr and returns its calls per second.
func nodeLoad(t *testing.T, addr string, callers, ms int) float64 {
	t.Helper()
	_, port, _ := strings.Cut(addr, "127.0.0.1:")
	cmd := exec.Command("node", "mw-load.mjs", port, strconv.Itoa(callers), strconv.Itoa(ms))
	cmd.Dir = nodeDir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mw-load.mjs: %v", err)
	}
	var r struct{ Calls, Ms, Errors int }
	if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), `{"calls":%d,"ms":%d,"errors":%d}`, &r.Calls, &r.Ms, &r.Errors); err != nil {
		t.Fatalf("mw-load.mjs printed %q: %v", out, err)
	}
	if r.Errors > 0 {
		t.Errorf("mw-load.mjs against %s: %d calls failed", addr, r.Errors)
	}
	return float64(r.Calls) / (float64(r.Ms) / 1000)
}
