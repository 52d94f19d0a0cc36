package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
)

// Config is what [Run] measures.
type Config struct {
	// Contenders names the contenders to run (all when empty).
	Contenders []string
	// Concurrency lists the numbers of concurrent callers.
	Concurrency []int
	// Runs is how many times each cell is measured; the report shows the
	// median.
	Runs int
	// Warmup and Duration bound each run: calls that complete in the
	// Duration window after Warmup count.
	Warmup, Duration time.Duration
	// MaxCalls bounds each run's calls (0: the time bounds alone).
	MaxCalls int64

	// Hops runs the two-hop scenario: Callers callers call A, which calls
	// B, which answers after Delay.
	Hops        bool
	HopsCallers int
	HopsDelay   time.Duration

	// Cluster runs the cluster scenario: ClusterCallers callers call A,
	// whose client balances its calls over ClusterReplicas replicas of B,
	// each answering after ClusterDelay.
	Cluster         bool
	ClusterCallers  int
	ClusterReplicas int
	ClusterDelay    time.Duration

	// InProcess lists the numbers of concurrent callers of the in-process
	// section (empty: skip it): wizard's ActE and Act beside MicroWizard's
	// actE and act and Moleculer's broker.call, each in its own process.
	InProcess []int

	// CPUProfileDir, when set, receives a CPU profile of the client
	// process (client.pprof) and of each server process.
	CPUProfileDir string
	// Log receives progress lines (nil: none).
	Log io.Writer
	// Stderr receives the server processes' standard error (nil: the
	// parent's).
	Stderr io.Writer
	// Command is the command line printed in the report.
	Command string
}

// Cell is the median of the runs of one contender at one concurrency.
type Cell struct {
	Contender string // Title
	Name      string
	Extra     bool // the contender is a labelled extra row
	Callers   int
	PerSec    float64
	P50, P99  time.Duration
	Errors    int
	FirstErr  string
	Runs      []Sample
}

// Report is what [Run] measured.
type Report struct {
	Env        Env
	Config     Config
	Contenders []Contender
	Cells      []Cell // by concurrency, then contender order
	Hops       []Cell // the two-hop scenario; the first row is the in-process sleep baseline
	Cluster    []ClusterRow
	InProcess  []Cell // by callers, then row order
	Gaps       []Gap
	Elapsed    time.Duration
	StartedAt  time.Time
	LoadEnd    string // the load average when the run ended
}

// Run starts a server process per contender, measures every cell Runs
// times (interleaving contenders, so that drift in the machine spreads
// over all of them), then runs the two-hop and the cluster scenarios.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Runs <= 0 {
		cfg.Runs = 1
	}
	if cfg.HopsCallers <= 0 {
		cfg.HopsCallers = 50
	}
	if cfg.ClusterCallers <= 0 {
		cfg.ClusterCallers = 50
	}
	if cfg.ClusterReplicas <= 0 {
		cfg.ClusterReplicas = 3
	}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", args...)
		}
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	cs, err := selectContenders(cfg.Contenders)
	if err != nil {
		return nil, err
	}
	rep := &Report{Env: environment(), Config: cfg, Gaps: slices.Clone(Gaps), StartedAt: time.Now()}
	cs = prepare(ctx, cs, rep, logf)
	rep.Contenders = cs
	if cfg.CPUProfileDir != "" {
		if err := os.MkdirAll(cfg.CPUProfileDir, 0o755); err != nil {
			return nil, err
		}
		f, err := os.Create(filepath.Join(cfg.CPUProfileDir, "client.pprof"))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}

	var children []*child
	defer func() {
		for _, c := range children {
			if err := c.stop(); err != nil {
				logf("%v", err)
			}
		}
	}()
	profile := func(name string) string {
		if cfg.CPUProfileDir == "" {
			return ""
		}
		return filepath.Join(cfg.CPUProfileDir, "server-"+name+".pprof")
	}

	if len(cfg.Concurrency) > 0 {
		clients := make([]Client, len(cs))
		defer func() {
			for _, c := range clients {
				if c != nil {
					c.Close()
				}
			}
		}()
		for i, c := range cs {
			ch, err := startChild(ctx, ServerSpec{Contender: c.Name, Role: RoleAdd, Listen: "127.0.0.1:0", CPUProfile: profile(c.Name)}, cfg.Stderr)
			if err != nil {
				return nil, err
			}
			children = append(children, ch)
			logf("%-14s server pid %d on %s", c.Title, ch.Pid(), ch.addr)
			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			clients[i], err = dialContender(dctx, c, ch.addr)
			cancel()
			if err != nil {
				return nil, err
			}
		}
		for _, n := range cfg.Concurrency {
			runs := make([][]Sample, len(cs))
			for r := range cfg.Runs {
				for i, c := range cs {
					s, err := driveContender(ctx, c, clients[i], Load{Callers: n, Warmup: cfg.Warmup, Duration: cfg.Duration, MaxCalls: cfg.MaxCalls})
					if err != nil {
						return nil, fmt.Errorf("%s, %d callers: %w", c.Title, n, err)
					}
					logf("%-14s %5d callers  run %d/%d  %10.0f req/s  p50 %9v  p99 %9v  errors %d",
						c.Title, n, r+1, cfg.Runs, s.PerSec, s.P50, s.P99, s.Errors)
					runs[i] = append(runs[i], s)
				}
			}
			for i, c := range cs {
				rep.Cells = append(rep.Cells, cellOf(c, n, runs[i]))
			}
		}
	}

	if cfg.Hops {
		if err := runHops(ctx, cfg, cs, rep, &children, profile, logf); err != nil {
			return nil, err
		}
	}
	if len(cfg.InProcess) > 0 {
		if err := runInProcess(ctx, cfg, rep, logf); err != nil {
			return nil, err
		}
	}
	if cfg.Cluster {
		if err := runCluster(ctx, cfg, cs, rep, &children, profile, logf); err != nil {
			return nil, err
		}
	}
	rep.Elapsed = time.Since(rep.StartedAt)
	rep.LoadEnd = loadAverage()
	return rep, nil
}

// runHops runs the seed article's scenario: callers -> A -> B, B answers
// after cfg.HopsDelay, A and B separate processes.
func runHops(ctx context.Context, cfg Config, cs []Contender, rep *Report, children *[]*child, profile func(string) string, logf func(string, ...any)) error {
	load := Load{Callers: cfg.HopsCallers, Warmup: cfg.Warmup, Duration: cfg.Duration, MaxCalls: cfg.MaxCalls}
	var hops []*scenarioRun
	defer func() {
		for _, h := range hops {
			if h.client != nil {
				h.client.Close()
			}
		}
	}()
	for _, c := range cs {
		if !c.Hops {
			continue
		}
		b, err := startChild(ctx, ServerSpec{Contender: c.Name, Role: RoleSleep, Listen: "127.0.0.1:0", Delay: cfg.HopsDelay, CPUProfile: profile(c.Name + "-B")}, cfg.Stderr)
		if err != nil {
			return err
		}
		*children = append(*children, b)
		a, err := startChild(ctx, ServerSpec{Contender: c.Name, Role: RoleForward, Listen: "127.0.0.1:0", Upstreams: []string{b.addr}, CPUProfile: profile(c.Name + "-A")}, cfg.Stderr)
		if err != nil {
			return err
		}
		*children = append(*children, a)
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		cl, err := dialChecked(dctx, c, a.addr, DialOptions{})
		cancel()
		if err != nil {
			return err
		}
		hops = append(hops, &scenarioRun{c: c, client: cl})
		logf("%-14s two hops: A pid %d on %s -> B pid %d on %s", c.Title, a.Pid(), a.addr, b.Pid(), b.addr)
	}
	base := &scenarioRun{c: Contender{Name: sleepName, Title: fmt.Sprintf("%v sleep, no network", cfg.HopsDelay)}, client: sleepClient{cfg.HopsDelay}}
	all := append([]*scenarioRun{base}, hops...)
	if err := driveRuns(ctx, cfg.Runs, load, "two hops", all, logf); err != nil {
		return err
	}
	for _, h := range all {
		rep.Hops = append(rep.Hops, cellOf(h.c, load.Callers, h.runs))
	}
	return nil
}

// scenarioRun is one contender in a scenario (two hops, cluster): its
// client and the samples of its runs.
type scenarioRun struct {
	c      Contender
	client Client
	runs   []Sample
}

// driveRuns drives every scenario's client runs times, taking turns so
// that drift in the machine's load falls on all of them alike.
func driveRuns(ctx context.Context, runs int, load Load, what string, all []*scenarioRun, logf func(string, ...any)) error {
	for r := range runs {
		for _, s := range all {
			smp, err := drive(ctx, s.client, load)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", s.c.Title, what, err)
			}
			logf("%-14s %s, %d callers  run %d/%d  %8.0f req/s  p50 %9v  p99 %9v  errors %d",
				s.c.Title, what, load.Callers, r+1, runs, smp.PerSec, smp.P50, smp.P99, smp.Errors)
			s.runs = append(s.runs, smp)
		}
	}
	return nil
}

const sleepName = "sleep"

// sleepClient is the scenario's baseline: the delay alone, in the caller's
// process, with the same timer B uses.
type sleepClient struct{ d time.Duration }

func (s sleepClient) Call(ctx context.Context, a, b float64) (float64, error) {
	t := time.NewTimer(s.d)
	defer t.Stop()
	select {
	case <-t.C:
		return a + b, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (sleepClient) Close() error { return nil }

// cellOf takes the median of each measure over runs.
func cellOf(c Contender, callers int, runs []Sample) Cell {
	cell := Cell{Contender: c.Title, Name: c.Name, Extra: c.Extra, Callers: callers, Runs: runs}
	var rates []float64
	var p50s, p99s []time.Duration
	for _, s := range runs {
		rates = append(rates, s.PerSec)
		p50s = append(p50s, s.P50)
		p99s = append(p99s, s.P99)
		cell.Errors += s.Errors
		if s.FirstErr != nil && cell.FirstErr == "" {
			cell.FirstErr = s.FirstErr.Error()
		}
	}
	cell.PerSec = benchkit.Median(rates)
	cell.P50 = benchkit.Median(p50s)
	cell.P99 = benchkit.Median(p99s)
	return cell
}
