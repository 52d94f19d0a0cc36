package gwbench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
)

// Cell is the median of the runs of one contender at one number of
// connections.
type Cell struct {
	Contender string
	Conns     int
	Stats     // PerSec and each percentile the median over Runs; Errors summed
	Runs      []Stats
	// RSS and CPU are the gateway process's: its VmRSS at the end of a
	// run and its CPU over the run (% of one core), medians over Runs
	// (zero for WizardDirect).
	RSS int64
	CPU float64
	// CPUs is the gateway's CPU (% of one core) in each run, beside Runs.
	CPUs []float64
}

// cpuPerCall is the gateway's CPU time per answered call in run i:
// its CPU over the run (warm-up included) divided by the run's req/s
// (0 when unknown).
func (c Cell) cpuPerCall(i int) time.Duration {
	if i >= len(c.CPUs) || i >= len(c.Runs) || c.Runs[i].PerSec <= 0 || c.CPUs[i] <= 0 {
		return 0
	}
	return time.Duration(c.CPUs[i] / 100 / c.Runs[i].PerSec * float64(time.Second))
}

// compare runs the side by side comparison: every contender at every
// level, the runs interleaved so that drift in the machine's load falls on
// all of them alike.
func (e *env) compare(ctx context.Context, cfg Config, rep *Report, logf func(string, ...any)) error {
	all := Contenders
	if e.baseBin != "" {
		all = slices.Insert(slices.Clone(Contenders), 1, WizardBaseline)
	}
	names := cfg.Contenders
	if len(names) == 0 {
		names = all
	} else if e.baseBin != "" && !slices.Contains(names, WizardBaseline) {
		names = append(slices.Clone(names), WizardBaseline)
	}
	for _, n := range names {
		if !slices.Contains(all, n) {
			return fmt.Errorf("gwbench: unknown contender %q (have %v)", n, all)
		}
	}
	var gws []*gateway
	defer func() {
		for _, g := range gws {
			e.stopGateway(g)
		}
	}()
	type entry struct {
		name string
		g    *gateway // nil for WizardDirect
	}
	var entries []entry
	for _, name := range all {
		if !slices.Contains(names, name) {
			continue
		}
		var g *gateway
		var err error
		switch name {
		case WizardGateway:
			g, err = e.startWizardGateway(ctx, nil, "compare")
		case WizardBaseline:
			g, err = e.startWizardGatewayBin(ctx, e.baseBin, nil, "baseline")
		case MoleculerWeb:
			if why := e.prepareMoleculer(ctx); why != "" {
				rep.Gaps = append(rep.Gaps, Gap{MoleculerWeb, why})
				logf("moleculer-web: skipped: %s", why)
				continue
			}
			g, err = e.startMoleculer(ctx)
		case GRPCGateway:
			g, err = e.startGRPCGateway(ctx)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if g != nil {
			gws = append(gws, g)
			logf("%-14s gateway pid %d on %s", name, g.main.pid(), g.base)
		}
		entries = append(entries, entry{name, g})
	}
	// A warm-up of every gateway before the first level, unmeasured:
	// Node.js compiles its hot paths as it runs them, so without it the
	// first cells would measure moleculer-web's interpreter.
	for _, en := range entries {
		if en.g == nil {
			continue
		}
		var cs []caller
		for range 16 {
			cs = append(cs, en.g.httpCaller(""))
		}
		s, err := drive(ctx, cs, 0, max(2*cfg.Warmup, 100*time.Millisecond))
		for _, c := range cs {
			c.close()
		}
		if err != nil {
			return fmt.Errorf("%s: warm-up: %w", en.name, err)
		}
		logf("%-14s warm-up, 16 conns: %.0f req/s, %d errors", en.name, s.PerSec, s.Errors)
	}
	for _, n := range cfg.Levels {
		type pool struct {
			name    string
			pid     int // the gateway's, 0 for WizardDirect
			callers []caller
			runs    []Stats
			rss     []int64
			cpu     []float64
		}
		var pools []*pool
		closeAll := func() {
			for _, p := range pools {
				for _, c := range p.callers {
					c.close()
				}
			}
		}
		for _, en := range entries {
			p := &pool{name: en.name}
			if en.g != nil {
				p.pid = en.g.main.pid()
			}
			if en.g == nil { // WizardDirect: one node, one connection, one caller
				if n != 1 {
					continue
				}
				w, err := dialWizard(ctx, e.echo.addr)
				if err != nil {
					closeAll()
					return fmt.Errorf("%s: %w", en.name, err)
				}
				p.callers = []caller{w}
			} else {
				for range n {
					p.callers = append(p.callers, en.g.httpCaller(""))
				}
			}
			if err := p.callers[0].call(ctx, 1); err != nil {
				closeAll()
				return fmt.Errorf("%s: first call: %w", en.name, err)
			}
			pools = append(pools, p)
		}
		for r := range cfg.Runs {
			// The order alternates: forward in even runs, reversed in odd
			// ones, so that no contender always runs first (or right after
			// the same other) and a drift of the machine's load falls on
			// both sides of each run's paired ratios alike.
			order := slices.Clone(pools)
			if r%2 == 1 {
				slices.Reverse(order)
			}
			for _, p := range order {
				var mon *monitor
				if p.pid != 0 {
					var err error
					if mon, err = startMonitor([]int{p.pid}, time.Second); err != nil {
						closeAll()
						return err
					}
				}
				s, err := drive(ctx, p.callers, cfg.Warmup, cfg.Duration)
				cpu := ""
				if mon != nil {
					res, _ := mon.finish()
					p.rss, p.cpu = append(p.rss, res.EndRSS), append(p.cpu, res.AvgCPU)
					cpu = fmt.Sprintf("  gateway CPU %.0f%%", res.AvgCPU)
				}
				if err != nil {
					closeAll()
					return fmt.Errorf("%s, %d connections: %w", p.name, n, err)
				}
				logf("%-14s %5d conns  run %d/%d  %8.0f req/s  p50 %9v  p99 %9v  errors %d%s", p.name, n, r+1, cfg.Runs, s.PerSec, s.P50, s.P99, s.Errors, cpu)
				p.runs = append(p.runs, s)
			}
		}
		closeAll()
		for _, p := range pools {
			c := cellOf(p.name, n, p.runs)
			c.RSS, c.CPU, c.CPUs = benchkit.Median(p.rss), benchkit.Median(p.cpu), p.cpu
			rep.Cells = append(rep.Cells, c)
		}
	}
	return nil
}

// cellOf takes the median of each measure over runs.
func cellOf(name string, conns int, runs []Stats) Cell {
	c := Cell{Contender: name, Conns: conns, Runs: runs}
	var rates []float64
	var p50, p75, p95, p99 []time.Duration
	for _, s := range runs {
		rates = append(rates, s.PerSec)
		p50, p75, p95, p99 = append(p50, s.P50), append(p75, s.P75), append(p95, s.P95), append(p99, s.P99)
		c.Calls += s.Calls
		c.Errors += s.Errors
		if c.FirstErr == "" {
			c.FirstErr = s.FirstErr
		}
	}
	c.PerSec = benchkit.Median(rates)
	c.P50, c.P75, c.P95, c.P99 = benchkit.Median(p50), benchkit.Median(p75), benchkit.Median(p95), benchkit.Median(p99)
	return c
}
