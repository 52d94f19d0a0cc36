package gwbench

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
)

// proc is a process the benchmark started.
type proc struct {
	*benchkit.Proc
	addr string // the first line it printed, when it prints one
}

// startProc starts cmd. When printsAddr, it waits for the process's first
// line on stdout, which is its address. Stopping it closes its stdin (the
// children of this package and moleculer/server.js stop on that) and sends
// it os.Interrupt (the gateway stops on that).
func startProc(ctx context.Context, name string, cmd *exec.Cmd, printsAddr bool, stderr io.Writer) (*proc, error) {
	p, err := benchkit.Start(ctx, name, cmd, benchkit.Options{Stderr: stderr, Addr: printsAddr, AddrTimeout: time.Minute, Interrupt: true})
	if err != nil {
		return nil, err
	}
	return &proc{Proc: p, addr: p.Addr()}, nil
}

// query writes q on the process's stdin and waits for its one-line
// answer, which must be "ok".
func (p *proc) query(ctx context.Context, q string) error {
	l, err := p.Ask(ctx, q, time.Minute)
	if err != nil {
		return err
	}
	if l != "ok" {
		return fmt.Errorf("%s answered %q to %q", p.Name(), l, q)
	}
	return nil
}

func (p *proc) pid() int    { return p.Pid() }
func (p *proc) stop() error { return p.Stop() }

// monitor samples the usage of a set of processes (a contender may be
// more than one) every interval, for the CPU percentages of a scenario.
type monitor struct {
	pids     []int
	interval time.Duration

	mu      sync.Mutex
	start   benchkit.Usage // summed over pids, at the start
	last    benchkit.Usage
	lastAt  time.Time
	startAt time.Time
	maxRSS  int64
	maxCPU  float64 // % of one core, the busiest interval
	sumRSS  int64   // over the samples, for the average
	samples int64
	err     error
	stop    chan struct{}
	stopped chan struct{}
}

func sumUsage(pids []int) (benchkit.Usage, error) {
	var s benchkit.Usage
	for _, p := range pids {
		u, err := benchkit.ReadUsage(p)
		if err != nil {
			return s, err
		}
		s.RSS += u.RSS
		s.HWM += u.HWM
		s.CPU += u.CPU
	}
	return s, nil
}

// startMonitor reads the processes' usage now and then every interval
// until [monitor.finish].
func startMonitor(pids []int, interval time.Duration) (*monitor, error) {
	u, err := sumUsage(pids)
	if err != nil {
		return nil, err
	}
	m := &monitor{pids: pids, interval: interval, start: u, last: u, lastAt: time.Now(), maxRSS: u.RSS,
		stop: make(chan struct{}), stopped: make(chan struct{})}
	m.startAt = m.lastAt
	go m.loop()
	return m, nil
}

func (m *monitor) loop() {
	defer close(m.stopped)
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.sample()
		}
	}
}

func (m *monitor) sample() {
	u, err := sumUsage(m.pids)
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		if m.err == nil {
			m.err = err
		}
		return
	}
	// The busiest interval, of those at least half the sampling interval
	// long: the CPU times tick every 10 ms, so a sample taken just after
	// the ticker's (finish's last one) would turn one tick into thousands
	// of percent.
	if dt := now.Sub(m.lastAt); dt >= m.interval/2 {
		m.maxCPU = max(m.maxCPU, 100*float64(u.CPU-m.last.CPU)/float64(dt))
	}
	m.maxRSS = max(m.maxRSS, u.RSS, u.HWM)
	m.sumRSS += u.RSS
	m.samples++
	m.last, m.lastAt = u, now
}

// rssNow reads the processes' resident memory now.
func (m *monitor) rssNow() int64 {
	u, err := sumUsage(m.pids)
	if err != nil {
		return 0
	}
	return u.RSS
}

// Resources is what a monitor saw over a scenario.
type Resources struct {
	StartRSS int64   // bytes, summed over the contender's processes, before the load
	MaxRSS   int64   // the peak: the largest VmHWM or sampled VmRSS
	EndRSS   int64   // at the end of the load
	AvgRSS   int64   // the mean of the samples
	AvgCPU   float64 // % of one core over the scenario
	MaxCPU   float64 // % of one core, the busiest sampling interval
}

// finish stops sampling and returns what the monitor saw.
func (m *monitor) finish() (Resources, error) {
	close(m.stop)
	<-m.stopped
	m.sample()
	m.mu.Lock()
	defer m.mu.Unlock()
	r := Resources{StartRSS: m.start.RSS, MaxRSS: m.maxRSS, EndRSS: m.last.RSS, MaxCPU: m.maxCPU}
	if m.samples > 0 {
		r.AvgRSS = m.sumRSS / m.samples
	}
	if dt := m.lastAt.Sub(m.startAt); dt > 0 {
		r.AvgCPU = 100 * float64(m.last.CPU-m.start.CPU) / float64(dt)
	}
	return r, m.err
}
