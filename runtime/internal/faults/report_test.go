//go:build linux

package faults_test

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// reportEnv names the file the results table is written to.
const reportEnv = "WIZARD_FAULT_REPORT"

// row is one line of the results table.
type row struct {
	scenario, figure, value, target, result string
}

var table struct {
	sync.Mutex
	rows []row
}

// scenario collects one scenario's figures.
type scenario struct {
	t    *testing.T
	name string
}

func newScenario(t *testing.T, name string) *scenario { return &scenario{t: t, name: name} }

// info records a figure that has no target.
func (s *scenario) info(figure, value string) {
	s.add(row{s.name, figure, value, "", "—"})
}

// target records a figure against its target and fails the test when it
// is missed; the test goes on, so that the table is complete.
func (s *scenario) target(figure, value, target string, met bool) {
	s.t.Helper()
	result := "met"
	if !met {
		result = "**missed**"
		s.t.Errorf("%s: %s = %s; target %s: missed", s.name, figure, value, target)
	}
	s.add(row{s.name, figure, value, target, result})
}

func (s *scenario) add(r row) {
	s.t.Helper()
	s.t.Logf("%s | %s | %s | %s | %s", r.scenario, r.figure, r.value, r.target, r.result)
	table.Lock()
	defer table.Unlock()
	table.rows = append(table.rows, r)
}

// writeTable prints the results table and writes it to the file
// reportEnv names, if any.
func writeTable() error {
	table.Lock()
	defer table.Unlock()
	if len(table.rows) == 0 {
		return nil
	}
	var b strings.Builder
	f := durations()
	balancer := "the default balancer"
	if v := os.Getenv(balancerEnv); v != "" {
		balancer = balancerEnv + "=" + v
	}
	fmt.Fprintf(&b, "Fault suite, %s form (%s=%s), %s: %s; %d workers of each kind at %d calls/s each; %s.\n\n",
		f.name, faultEnv, os.Getenv(faultEnv), time.Now().UTC().Format(time.RFC3339), f, workers, workerRate, balancer)
	b.WriteString("| scenario | figure | value | target | result |\n|---|---|---|---|---|\n")
	for _, r := range table.rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.scenario, r.figure, r.value, r.target, r.result)
	}
	fmt.Print("\n" + b.String())
	if path := os.Getenv(reportEnv); path != "" {
		return os.WriteFile(path, []byte(b.String()), 0o644)
	}
	return nil
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
