package gwbench

import (
	"os"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
)

// TestMonitorBusiestInterval checks that a sample taken soon after the
// last one does not count as the busiest interval: the CPU times tick
// every 10 ms, and one tick over a millisecond read as thousands of
// percent.
func TestMonitorBusiestInterval(t *testing.T) {
	pid := os.Getpid()
	m, err := startMonitor([]int{pid}, time.Hour) // no sample of its own before finish
	if err != nil {
		t.Fatal(err)
	}
	c0, err := benchkit.CPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	guard := time.Now().Add(time.Minute)
	x := 0
	for c, _ := benchkit.CPU(pid); c == c0 && time.Now().Before(guard); c, _ = benchkit.CPU(pid) {
		for i := range 100000 {
			x += i
		}
	}
	_ = x
	r, err := m.finish() // its sample is far less than half the interval after the first
	if err != nil {
		t.Fatal(err)
	}
	if r.MaxCPU != 0 {
		t.Errorf("the busiest interval counted a sample %v after the last: %.1f%%", time.Hour, r.MaxCPU)
	}
	if r.AvgCPU <= 0 {
		t.Errorf("average CPU %.1f%%, want > 0: the process burned a tick", r.AvgCPU)
	}
}
