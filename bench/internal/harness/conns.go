package harness

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ConnsConfig is what [RunConns] measures: one server and Conns clients,
// each with its own connection to it (for wizard, each a node of its own).
type ConnsConfig struct {
	// Contenders names the contenders to run (default wizard-tcp).
	Contenders []string
	// Conns is the number of client connections (at least 2).
	Conns int
	// Runs, Warmup, Duration and MaxCalls are as in [Config]; each run
	// is a pair, Conns connections with a caller each, then one
	// connection with Conns callers.
	Runs             int
	Warmup, Duration time.Duration
	MaxCalls         int64
	// Settle is how long the server is left alone before its idle RSS
	// is read (default 1 s).
	Settle time.Duration
	// DialParallel bounds the clients dialled at once (default 16).
	DialParallel int
	// CPUProfileDir, when set, receives a CPU profile of each server
	// process (server-conns-NAME.pprof).
	CPUProfileDir string
	// Log receives progress lines (nil: none); Stderr the server
	// processes' standard error (nil: the parent's).
	Log, Stderr io.Writer
	// Command is the command line printed in the report.
	Command string
}

// ConnsRow is what [RunConns] measured of one contender.
type ConnsRow struct {
	Contender, Name string
	Conns           int
	// The server's resident set, in bytes: with one client connection
	// (after a call), with Conns idle connections (each after a call,
	// then Settle), the most sampled while Conns connections carried
	// calls, the most while one connection carried Conns callers, and
	// idle again after the runs (after Settle).
	RSSOne, RSSIdle, RSSBusy, RSSShared, RSSAfter int64
	// Spread is Conns connections with one caller each; Shared one
	// connection with Conns callers.
	Spread, Shared Cell
	// SpreadCPU and SharedCPU are their median CPU times per call.
	SpreadCPU, SharedCPU CPUPerCall
	// DialTime is how long the Conns clients took to connect.
	DialTime time.Duration
	// MemOne and MemIdle are the server's goroutines and Go memory with
	// one connection and with Conns idle, each after a collection.
	MemOne, MemIdle MemStats
}

// perIdleConn returns what each idle connection beyond the first adds to
// the server: goroutines, bytes of heap in use and of stacks.
func (r ConnsRow) perIdleConn() (goroutines, heap, stack float64) {
	n := float64(max(r.Conns-1, 1))
	return float64(r.MemIdle.Goroutines-r.MemOne.Goroutines) / n,
		(float64(r.MemIdle.HeapInuse) - float64(r.MemOne.HeapInuse)) / n,
		(float64(r.MemIdle.StackInuse) - float64(r.MemOne.StackInuse)) / n
}

// IdlePerConn is the server's RSS per idle connection beyond the first.
func (r ConnsRow) IdlePerConn() float64 { return r.perConn(r.RSSIdle) }

// BusyPerConn is the server's peak RSS per busy connection beyond the
// first.
func (r ConnsRow) BusyPerConn() float64 { return r.perConn(r.RSSBusy) }

func (r ConnsRow) perConn(rss int64) float64 {
	if r.Conns < 2 {
		return 0
	}
	return float64(rss-r.RSSOne) / float64(r.Conns-1)
}

// ConnsReport is what [RunConns] measured.
type ConnsReport struct {
	Env       Env
	Config    ConnsConfig
	Rows      []ConnsRow
	FDLimit   uint64
	StartedAt time.Time
	Elapsed   time.Duration
	LoadEnd   string
}

// The bars for the connections mode.
const (
	idleConnTarget = 32 << 10 // bytes of server RSS per idle connection
	spreadTarget   = 0.8      // Conns connections against one connection with Conns callers
)

// fdHeadroom is the file descriptors a process needs beyond its client
// connections (listeners, pipes, the runtime's own).
const fdHeadroom = 128

// RunConns measures, per contender, one server process with Conns client
// connections from this process: the server's RSS with them idle and
// busy, and req/s over them against one connection with as many callers.
func RunConns(ctx context.Context, cfg ConnsConfig) (*ConnsReport, error) {
	cfg.Runs = max(cfg.Runs, 1)
	if cfg.Settle <= 0 {
		cfg.Settle = time.Second
	}
	if cfg.DialParallel <= 0 {
		cfg.DialParallel = 16
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Conns < 2 {
		return nil, fmt.Errorf("harness: connections mode: %d connections, want at least 2", cfg.Conns)
	}
	if len(cfg.Contenders) == 0 {
		cfg.Contenders = []string{"wizard-tcp"}
	}
	cs, err := payloadContenders(cfg.Contenders) // the echo services serve this mode too
	if err != nil {
		return nil, err
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return nil, fmt.Errorf("harness: reading the file-descriptor limit: %w", err)
	}
	if need := uint64(cfg.Conns + fdHeadroom); lim.Cur < need {
		return nil, fmt.Errorf("harness: %d connections need about %d file descriptors in this process and in the server's; the limit is %d (raise it with ulimit -n)",
			cfg.Conns, need, lim.Cur)
	}
	logf := logger(cfg.Log)
	rep := &ConnsReport{Env: environment(), Config: cfg, FDLimit: lim.Cur, StartedAt: time.Now()}
	if cfg.CPUProfileDir != "" {
		stop, err := profileClient(cfg.CPUProfileDir, "client-conns.pprof")
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	for _, c := range cs {
		row, err := runConns(ctx, cfg, c, logf)
		if err != nil {
			return nil, err
		}
		rep.Rows = append(rep.Rows, row)
	}
	rep.Elapsed = time.Since(rep.StartedAt)
	rep.LoadEnd = loadAverage()
	return rep, nil
}

// runConns measures one contender (see [RunConns]).
func runConns(ctx context.Context, cfg ConnsConfig, c Contender, logf func(string, ...any)) (ConnsRow, error) {
	row := ConnsRow{Contender: c.Title, Name: c.Name, Conns: cfg.Conns}
	spec := ServerSpec{Contender: c.Name, Role: RoleAdd, Listen: "127.0.0.1:0"}
	if cfg.CPUProfileDir != "" {
		spec.CPUProfile = filepath.Join(cfg.CPUProfileDir, "server-conns-"+c.Name+".pprof")
	}
	ch, err := startChild(ctx, spec, cfg.Stderr)
	if err != nil {
		return row, err
	}
	defer func() {
		if err := ch.stop(); err != nil {
			logf("%v", err)
		}
	}()
	pid := ch.Pid()
	clients := make([]Client, cfg.Conns)
	defer closeClients(clients)
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	clients[0], err = dialChecked(dctx, c, ch.addr, DialOptions{})
	cancel()
	if err != nil {
		return row, err
	}
	if err := settle(ctx, cfg.Settle); err != nil {
		return row, err
	}
	if row.RSSOne, err = readRSS(pid); err != nil {
		return row, err
	}
	if row.MemOne, err = ch.mem(ctx); err != nil {
		return row, err
	}
	start := time.Now()
	if err := dialAll(ctx, c, ch.addr, clients, cfg.DialParallel); err != nil {
		return row, err
	}
	row.DialTime = time.Since(start)
	if err := settle(ctx, cfg.Settle); err != nil {
		return row, err
	}
	if row.RSSIdle, err = readRSS(pid); err != nil {
		return row, err
	}
	if row.MemIdle, err = ch.mem(ctx); err != nil {
		return row, err
	}
	logf("%-14s %d connections in %v; server pid %d RSS %s with one, %s with all idle (%s per connection)",
		c.Title, cfg.Conns, row.DialTime.Round(time.Millisecond), pid, Size(int(row.RSSOne)), Size(int(row.RSSIdle)), Size(int(row.IdlePerConn())))

	load := Load{Callers: cfg.Conns, Warmup: cfg.Warmup, Duration: cfg.Duration, MaxCalls: cfg.MaxCalls}
	spread := spreadClient(clients)
	var spreadRuns, sharedRuns []Sample
	var spreadCPU, sharedCPU []CPUPerCall
	for r := range cfg.Runs {
		for _, t := range []struct {
			what string
			c    Client
			runs *[]Sample
			cpu  *[]CPUPerCall
			peak *int64
		}{
			{fmt.Sprintf("%d connections", cfg.Conns), spread, &spreadRuns, &spreadCPU, &row.RSSBusy},
			{fmt.Sprintf("1 connection, %d callers", cfg.Conns), clients[0], &sharedRuns, &sharedCPU, &row.RSSShared},
		} {
			s, cpu, peak, err := driveSampled(ctx, t.c, load, pid)
			if err != nil {
				return row, fmt.Errorf("%s, %s: %w", c.Title, t.what, err)
			}
			*t.peak = max(*t.peak, peak)
			*t.runs = append(*t.runs, s)
			*t.cpu = append(*t.cpu, cpu)
			logf("%-14s %-26s run %d/%d  %9.0f req/s  p50 %9v  p99 %9v  CPU/call server %v client %v  errors %d  server RSS peak %s",
				c.Title, t.what, r+1, cfg.Runs, s.PerSec, s.P50, s.P99, cpu.Server, cpu.Client, s.Errors, Size(int(peak)))
		}
	}
	row.Spread, row.SpreadCPU = cellOf(c, cfg.Conns, spreadRuns), medianCPU(spreadCPU)
	row.Shared, row.SharedCPU = cellOf(c, cfg.Conns, sharedRuns), medianCPU(sharedCPU)
	if err := settle(ctx, cfg.Settle); err != nil {
		return row, err
	}
	row.RSSAfter, err = readRSS(pid)
	return row, err
}

// dialAll dials clients[1:] to addr, parallel at a time, each checked with
// a first call.
func dialAll(ctx context.Context, c Contender, addr string, clients []Client, parallel int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, parallel)
	for i := 1; i < len(clients); i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			cl, err := dialChecked(ctx, c, addr, DialOptions{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = fmt.Errorf("%s, connection %d of %d: %w", c.Title, i+1, len(clients), err)
				cancel()
			}
			clients[i] = cl
		}()
	}
	wg.Wait()
	return first
}

func closeClients(clients []Client) {
	var wg sync.WaitGroup
	for _, c := range clients {
		if c != nil {
			wg.Go(func() { c.Close() })
		}
	}
	wg.Wait()
}

// settle waits d, or until ctx is done.
func settle(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// spreadClient gives each caller of [drive] a connection of its own:
// drive numbers its callers 0 to n-1 in a.
type spreadClient []Client

func (s spreadClient) Call(ctx context.Context, a, b float64) (float64, error) {
	i := int(a)
	if i < 0 || i >= len(s) {
		return 0, fmt.Errorf("caller %v of %d connections", a, len(s))
	}
	return s[i].Call(ctx, a, b)
}

func (s spreadClient) Close() error { return nil }

// driveSampled drives c with l (see [driveCPU]) while it samples the RSS
// of process pid every 50 ms, and returns the run, its CPU times per call
// and the most RSS it saw.
func driveSampled(ctx context.Context, c Client, l Load, pid int) (Sample, CPUPerCall, int64, error) {
	stop := make(chan struct{})
	peak := make(chan int64, 1)
	go func() {
		var most int64
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if n, err := readRSS(pid); err == nil {
				most = max(most, n)
			}
			select {
			case <-t.C:
			case <-stop:
				peak <- most
				return
			}
		}
	}()
	s, cpu, err := driveCPU(ctx, c, l, pid)
	close(stop)
	return s, cpu, <-peak, err
}

// readRSS returns the resident set of process pid in bytes (VmRSS in
// /proc/PID/status).
func readRSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("harness: reading the server's RSS: %w", err)
	}
	return parseRSS(b)
}

// parseRSS finds VmRSS in the text of /proc/PID/status.
func parseRSS(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("harness: VmRSS line %q: want a number of kB", sc.Text())
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || n < 0 || n > math.MaxInt64>>10 {
			return 0, fmt.Errorf("harness: VmRSS line %q: want a number of kB", sc.Text())
		}
		return n << 10, nil
	}
	return 0, fmt.Errorf("harness: no VmRSS line in the process status")
}

func (r *ConnsReport) row(name string) (ConnsRow, bool) {
	for _, row := range r.Rows {
		if row.Name == name {
			return row, true
		}
	}
	return ConnsRow{}, false
}

// WriteMarkdown writes the connections section: RSS, req/s, targets.
func (r *ConnsReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	cfg := r.Config
	fmt.Fprintf(&b, "# %d client connections to one server\n\n", cfg.Conns)
	writeRunHeader(&b, cfg.Command, r.Env, r.StartedAt, r.Elapsed, r.LoadEnd)
	fmt.Fprintf(&b, "One server process; the client process opens %d clients to it, each with its own connection (for wizard, each a node of its own "+
		"with runtime.StaticPeers), and makes a call over each. The server's RSS (VmRSS) is read with one connection, with all %d idle "+
		"(%v after the last dial), as the most sampled every 50 ms during the runs, and idle again after them. A run pairs %d connections "+
		"with one caller each against one of those connections with %d callers; each is the median of %s of %v after %v of warm-up. "+
		"File-descriptor limit: %d.\n\n", cfg.Conns, cfg.Conns, cfg.Settle, cfg.Conns, cfg.Conns, runs(cfg.Runs), cfg.Duration, cfg.Warmup, r.FDLimit)
	fmt.Fprintf(&b, "| contender | server RSS, 1 conn | %d idle | per idle conn | peak busy | per busy conn | peak, 1 conn x %d callers | idle after | dial all |\n", cfg.Conns, cfg.Conns)
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", row.Contender, Size(int(row.RSSOne)), Size(int(row.RSSIdle)),
			Size(int(row.IdlePerConn())), Size(int(row.RSSBusy)), Size(int(row.BusyPerConn())), Size(int(row.RSSShared)), Size(int(row.RSSAfter)),
			dur(row.DialTime))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "What each idle connection adds to the server's Go runtime, from the server's own count after a collection (the \"mem\" control query; "+
		"heap counts the spans in use, so buffers allocated but never touched count here in full and in the RSS only for the pages written):\n\n")
	fmt.Fprintf(&b, "| contender | goroutines per conn | heap per conn | stacks per conn |\n|---|---:|---:|---:|\n")
	for _, row := range r.Rows {
		g, h, s := row.perIdleConn()
		fmt.Fprintf(&b, "| %s | %.1f | %s | %s |\n", row.Contender, g, Size(int(h)), Size(int(s)))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "| contender | load | req/s | p50 | p99 | vs 1 conn | server CPU/call | client CPU/call |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, row := range r.Rows {
		for _, l := range []struct {
			what string
			c    Cell
			cpu  CPUPerCall
		}{{fmt.Sprintf("%d connections, 1 caller each", cfg.Conns), row.Spread, row.SpreadCPU}, {fmt.Sprintf("1 connection, %d callers", cfg.Conns), row.Shared, row.SharedCPU}} {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", row.Contender, l.what, rate(l.c.PerSec), dur(l.c.P50), dur(l.c.P99),
				ratioIf(true, l.c.PerSec, row.Shared.PerSec), cpuDur(l.cpu.Server), cpuDur(l.cpu.Client))
		}
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "| target | measured | met |\n|---|---:|---|\n")
	measured, met := "not measured", "—"
	t, ok := r.row("wizard-tcp")
	if ok {
		measured, met = Size(int(t.IdlePerConn())), yesNo(t.IdlePerConn() <= idleConnTarget)
	}
	fmt.Fprintf(&b, "| wizard TCP: server RSS per idle connection ≤ %s | %s | %s |\n", Size(idleConnTarget), measured, met)
	measured, met = "not measured", "—"
	if ok && t.Shared.PerSec > 0 {
		x := t.Spread.PerSec / t.Shared.PerSec
		measured, met = strconv.FormatFloat(x, 'f', 2, 64)+"x", yesNo(x >= spreadTarget)
	}
	fmt.Fprintf(&b, "| wizard TCP: req/s over %d connections ≥ %.1fx one connection with %d callers | %s | %s |\n", cfg.Conns, spreadTarget, cfg.Conns, measured, met)
	b.WriteString("\n")
	if cfg.Runs > 1 {
		fmt.Fprintf(&b, "<details><summary>Every run (req/s, p50, p99)</summary>\n\n| contender | load | runs |\n|---|---|---|\n")
		for _, row := range r.Rows {
			fmt.Fprintf(&b, "| %s | %d connections | %s |\n", row.Contender, cfg.Conns, everyRun(row.Spread.Runs))
			fmt.Fprintf(&b, "| %s | 1 connection | %s |\n", row.Contender, everyRun(row.Shared.Runs))
		}
		fmt.Fprintf(&b, "\n</details>\n\n")
	}
	for _, row := range r.Rows {
		for _, c := range []Cell{row.Spread, row.Shared} {
			if c.Errors > 0 {
				fmt.Fprintf(&b, "- **%s: %d errors** (first: %s).\n", row.Contender, c.Errors, c.FirstErr)
			}
		}
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}
