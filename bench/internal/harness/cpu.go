package harness

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
)

// On a shared machine, wall-clock rates move with the other work; the
// CPU time a call costs moves much less. The scaling modes report both:
// the server process's CPU time and the client process's, per call.

// processCPU returns the user plus system CPU time process pid has used,
// all its threads together.
func processCPU(pid int) (time.Duration, error) {
	d, err := benchkit.CPU(pid)
	if err != nil {
		return 0, fmt.Errorf("harness: reading the server's CPU time: %w", err)
	}
	return d, nil
}

// selfCPU returns the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CPUPerCall is what a run cost in CPU time per call completed.
type CPUPerCall struct {
	Server, Client time.Duration
}

// countingClient counts the calls that complete, in the window or not.
type countingClient struct {
	Client
	n atomic.Int64
}

func (c *countingClient) Call(ctx context.Context, a, b float64) (float64, error) {
	r, err := c.Client.Call(ctx, a, b)
	if err == nil {
		c.n.Add(1)
	}
	return r, err
}

// driveCPU runs l against c like drive, and also measures the CPU time
// the server process pid and this process used per call over the whole
// run (warm-up included, every call counted).
func driveCPU(ctx context.Context, c Client, l Load, pid int) (Sample, CPUPerCall, error) {
	cc := &countingClient{Client: c}
	s0, err := processCPU(pid)
	if err != nil {
		return Sample{}, CPUPerCall{}, err
	}
	c0 := selfCPU()
	s, err := drive(ctx, cc, l)
	if err != nil {
		return s, CPUPerCall{}, err
	}
	c1 := selfCPU()
	s1, err := processCPU(pid)
	if err != nil {
		return s, CPUPerCall{}, err
	}
	n := time.Duration(max(cc.n.Load(), 1))
	return s, CPUPerCall{Server: (s1 - s0) / n, Client: (c1 - c0) / n}, nil
}

// medianCPU takes the median of each side's CPU time per call.
func medianCPU(runs []CPUPerCall) CPUPerCall {
	var s, c []time.Duration
	for _, r := range runs {
		s = append(s, r.Server)
		c = append(c, r.Client)
	}
	return CPUPerCall{Server: benchkit.Median(s), Client: benchkit.Median(c)}
}

// cpuDur formats a CPU time per call (µs below 1 ms).
func cpuDur(d time.Duration) string { return dur(d) }
