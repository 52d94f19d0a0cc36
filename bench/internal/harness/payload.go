package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

// PayloadConfig is what [RunPayload] measures: every contender's echo of
// each payload size, over one connection (pooled HTTP/1.1: one per
// concurrent caller).
type PayloadConfig struct {
	// Contenders names the contenders to run (all when empty).
	Contenders []string
	// Sizes lists the payload sizes in bytes, each at least 16.
	Sizes []int
	// Callers is the number of concurrent callers over the one
	// connection.
	Callers int
	// Runs, Warmup, Duration and MaxCalls are as in [Config].
	Runs             int
	Warmup, Duration time.Duration
	MaxCalls         int64
	// CPUProfileDir, when set, receives a CPU profile of each echo
	// server process (server-echo-NAME.pprof).
	CPUProfileDir string
	// Log receives progress lines (nil: none); Stderr the server
	// processes' standard error (nil: the parent's).
	Log, Stderr io.Writer
	// Command is the command line printed in the report.
	Command string
}

// PayloadCell is the median of the runs of one contender at one size.
type PayloadCell struct {
	Cell
	// Size is the payload in bytes, carried each way.
	Size int
	// BytesPerSec is PerSec times Size: payload bytes each way.
	BytesPerSec float64
	// CPU is the median CPU time per call of the server process and of
	// the client process.
	CPU CPUPerCall
}

// PayloadReport is what [RunPayload] measured.
type PayloadReport struct {
	Env        Env
	Config     PayloadConfig
	Contenders []Contender
	Cells      []PayloadCell // by size, then contender order
	StartedAt  time.Time
	Elapsed    time.Duration
	LoadEnd    string
}

// RunPayload starts an echo server process per contender and measures
// every size Runs times, taking turns among the contenders.
func RunPayload(ctx context.Context, cfg PayloadConfig) (*PayloadReport, error) {
	cfg.Runs = max(cfg.Runs, 1)
	cfg.Callers = max(cfg.Callers, 1)
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if len(cfg.Sizes) == 0 {
		return nil, fmt.Errorf("harness: payload mode: no sizes")
	}
	for _, n := range cfg.Sizes {
		if n < minPayload || n > floorEchoMax {
			return nil, fmt.Errorf("harness: payload of %d bytes: want %d to %d", n, minPayload, floorEchoMax)
		}
	}
	cs, err := payloadContenders(cfg.Contenders)
	if err != nil {
		return nil, err
	}
	logf := logger(cfg.Log)
	rep := &PayloadReport{Env: environment(), Config: cfg, Contenders: cs, StartedAt: time.Now()}
	if cfg.CPUProfileDir != "" {
		stop, err := profileClient(cfg.CPUProfileDir, "client-payload.pprof")
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	var children []*child
	var clients []EchoClient
	defer func() {
		for _, c := range clients {
			c.Close()
		}
		for _, c := range children {
			if err := c.stop(); err != nil {
				logf("%v", err)
			}
		}
	}()
	for _, c := range cs {
		e, err := echoerOf(c.Name)
		if err != nil {
			return nil, err
		}
		spec := ServerSpec{Contender: c.Name, Role: RoleEcho, Listen: "127.0.0.1:0"}
		if cfg.CPUProfileDir != "" {
			spec.CPUProfile = filepath.Join(cfg.CPUProfileDir, "server-echo-"+c.Name+".pprof")
		}
		ch, err := startChild(ctx, spec, cfg.Stderr)
		if err != nil {
			return nil, err
		}
		children = append(children, ch)
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		cl, err := e.dial(dctx, ch.addr)
		if err == nil {
			clients = append(clients, cl)
			err = checkEcho(dctx, cl, cfg.Sizes)
		}
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%s echo: %w", c.Title, err)
		}
		logf("%-14s echo server pid %d on %s", c.Title, ch.Pid(), ch.addr)
	}
	for _, size := range cfg.Sizes {
		runs := make([][]Sample, len(cs))
		cpus := make([][]CPUPerCall, len(cs))
		for r := range cfg.Runs {
			for i, c := range cs {
				ec, err := newEchoCaller(clients[i], size, cfg.Callers)
				if err != nil {
					return nil, err
				}
				load := Load{Callers: cfg.Callers, Warmup: cfg.Warmup, Duration: cfg.Duration, MaxCalls: cfg.MaxCalls}
				s, cpu, err := driveCPU(ctx, ec, load, children[i].Pid())
				if err != nil {
					return nil, fmt.Errorf("%s, %s payload: %w", c.Title, Size(size), err)
				}
				logf("%-14s %8s payload  run %d/%d  %9.0f req/s  %11s  p50 %9v  p99 %9v  CPU/call server %v client %v  errors %d",
					c.Title, Size(size), r+1, cfg.Runs, s.PerSec, bytesRate(s.PerSec*float64(size)), s.P50, s.P99, cpu.Server, cpu.Client, s.Errors)
				runs[i] = append(runs[i], s)
				cpus[i] = append(cpus[i], cpu)
			}
		}
		for i, c := range cs {
			cell := cellOf(c, cfg.Callers, runs[i])
			rep.Cells = append(rep.Cells, PayloadCell{Cell: cell, Size: size, BytesPerSec: cell.PerSec * float64(size), CPU: medianCPU(cpus[i])})
		}
	}
	rep.Elapsed = time.Since(rep.StartedAt)
	rep.LoadEnd = loadAverage()
	return rep, nil
}

// checkEcho echoes one payload of each size (and of 16 bytes) over c.
func checkEcho(ctx context.Context, c EchoClient, sizes []int) error {
	for _, n := range append([]int{minPayload}, sizes...) {
		ec, err := newEchoCaller(c, n, 1)
		if err != nil {
			return err
		}
		if _, err := ec.Call(ctx, 0, 7); err != nil {
			return fmt.Errorf("first echo of %s: %w", Size(n), err)
		}
	}
	return nil
}

// profileClient makes dir and starts a CPU profile of this process into
// dir/name; the function returned stops it.
func profileClient(dir, name string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func logger(w io.Writer) func(string, ...any) {
	return func(format string, args ...any) {
		if w != nil {
			fmt.Fprintf(w, format+"\n", args...)
		}
	}
}

// cell returns the cell of contender name at size.
func (r *PayloadReport) cell(name string, size int) (PayloadCell, bool) {
	for _, c := range r.Cells {
		if c.Name == name && c.Size == size {
			return c, true
		}
	}
	return PayloadCell{}, false
}

// Size formats a byte count in B, KiB or MiB ("64 KiB"), exactly when it
// is a whole number of the unit.
func Size(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + " MiB"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + " KiB"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB"
	}
	return strconv.Itoa(n) + " B"
}

// ParseSize parses a byte count: a number with an optional unit, B, K or
// KiB, M or MiB ("64KiB", "1M", "16").
func ParseSize(s string) (int, error) {
	t := strings.TrimSpace(s)
	mult := 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"K", 1 << 10}, {"M", 1 << 20}, {"B", 1}} {
		if v, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(v), u.mult
			break
		}
	}
	n, err := strconv.Atoi(t)
	if err != nil || n <= 0 || n > floorEchoMax/mult {
		return 0, fmt.Errorf("%q is not a size (a positive number of bytes, K or KiB, M or MiB, at most %s)", s, Size(floorEchoMax))
	}
	return n * mult, nil
}

// bytesRate formats bytes per second in decimal units (MB/s), as the
// chart's axis does.
func bytesRate(v float64) string {
	switch {
	case v >= 1e9:
		return strconv.FormatFloat(v/1e9, 'f', 2, 64) + " GB/s"
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 1, 64) + " MB/s"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', 1, 64) + " kB/s"
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + " B/s"
}

// payloadTargets are the bars for wizard TCP's bytes/s with 64 KiB
// payloads: multiples of the floor's, gRPC-go's and pooled HTTP/1.1's.
var payloadTargets = []struct {
	against, title string
	x              float64
}{
	{floorName, "the floor's", 0.85},
	{gRPCName, "gRPC-go's", 2},
	{"http", "pooled HTTP/1.1's", 1.5},
}

// WriteMarkdown writes the payload section: the table, the targets and
// notes.
func (r *PayloadReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	cfg := r.Config
	fmt.Fprintf(&b, "# Payloads: echo of 16 B to 1 MiB\n\n")
	writeRunHeader(&b, cfg.Command, r.Env, r.StartedAt, r.Elapsed, r.LoadEnd)
	fmt.Fprintf(&b, "Each contender echoes a payload: the request carries it and the answer carries the same bytes back, so every call moves "+
		"the payload once each way; bytes/s counts the payload one way (req/s x size). %d callers share the contender's one connection "+
		"(pooled HTTP/1.1 gives each concurrent caller a connection of its own, as its add call does); "+
		"each cell is the median of %s of %v after %v of warm-up, and every answer's length and stamps (the call's number at both ends) are checked. "+
		"CPU/call is the user and system time of the server process and of the client process over a whole run, warm-up included, divided by its calls "+
		"(the server's from /proc/PID/stat, in 10 ms ticks): on a shared machine it moves less than the rates do.\n\n",
		cfg.Callers, runs(cfg.Runs), cfg.Duration, cfg.Warmup)
	fmt.Fprintf(&b, "| payload | contender | req/s | bytes/s | p50 | p99 | bytes/s vs floor | bytes/s vs gRPC-go | server CPU/call | client CPU/call | CPU/call vs floor |\n")
	fmt.Fprintf(&b, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range r.Cells {
		f, fok := r.cell(floorName, c.Size)
		g, gok := r.cell(gRPCName, c.Size)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", Size(c.Size), c.Contender, rate(c.PerSec), bytesRate(c.BytesPerSec),
			dur(c.P50), dur(c.P99), ratioIf(fok, c.BytesPerSec, f.BytesPerSec), ratioIf(gok, c.BytesPerSec, g.BytesPerSec),
			cpuDur(c.CPU.Server), cpuDur(c.CPU.Client), ratioIf(fok, float64(c.CPU.Server+c.CPU.Client), float64(f.CPU.Server+f.CPU.Client)))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "| target (%d callers) | measured | met |\n|---|---:|---|\n", cfg.Callers)
	for _, tg := range payloadTargets {
		const size = 64 << 10
		t, tok := r.cell("wizard-tcp", size)
		o, ook := r.cell(tg.against, size)
		measured, met := "not measured", "—"
		if tok && ook && o.BytesPerSec > 0 {
			x := t.BytesPerSec / o.BytesPerSec
			measured = strconv.FormatFloat(x, 'f', 2, 64) + "x"
			met = yesNo(x >= tg.x)
		}
		fmt.Fprintf(&b, "| wizard TCP, %s payload: bytes/s ≥ %gx %s | %s | %s |\n", Size(size), tg.x, tg.title, measured, met)
	}
	b.WriteString("\n")
	if cfg.Runs > 1 {
		fmt.Fprintf(&b, "<details><summary>Every run (req/s, p50, p99)</summary>\n\n| payload | contender | runs |\n|---:|---|---|\n")
		for _, c := range r.Cells {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", Size(c.Size), c.Contender, everyRun(c.Runs))
		}
		fmt.Fprintf(&b, "\n</details>\n\n")
	}
	fmt.Fprintf(&b, "Notes:\n\n")
	for _, c := range r.Contenders {
		if e, ok := echoers[c.Name]; ok {
			fmt.Fprintf(&b, "- **%s**: %s.\n", c.Title, e.note)
		}
	}
	for _, c := range r.Cells {
		if c.Errors > 0 {
			fmt.Fprintf(&b, "- **%s, %s: %d errors** (first: %s).\n", c.Contender, Size(c.Size), c.Errors, c.FirstErr)
		}
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeRunHeader writes the command, the machine and the load average of a
// run.
func writeRunHeader(b *strings.Builder, command string, e Env, started time.Time, elapsed time.Duration, loadEnd string) {
	if command != "" {
		fmt.Fprintf(b, "Command: `%s`  \n", command)
	}
	fmt.Fprintf(b, "Machine: %s, %d CPUs, GOMAXPROCS %d in every process, %s %s/%s", orUnknown(e.CPU), e.NumCPU, e.GOMAXPROCS, e.GoVersion, e.OS, e.Arch)
	if e.Commit != "" {
		fmt.Fprintf(b, ", wizard at %s", e.Commit)
	}
	fmt.Fprintf(b, "  \nStarted %s, took %v; load average %s at the start, %s at the end.\n\n",
		started.UTC().Format(time.RFC3339), elapsed.Round(time.Second), orUnknown(e.LoadStart), orUnknown(loadEnd))
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

// WriteSVG draws payload bytes/s per contender, one group per size.
func (r *PayloadReport) WriteSVG(w io.Writer) error {
	var groups []string
	for _, n := range r.Config.Sizes {
		groups = append(groups, Size(n))
	}
	var series []chartSeries
	for _, c := range r.Contenders {
		series = append(series, chartSeries{name: c.Name, title: c.Title})
	}
	ch := groupedChart{
		title:  "Payload bytes per second, each way (log scale, higher is better)",
		sub:    fmt.Sprintf("echo, %d callers; server in its own process on 127.0.0.1; median of %s of %v; %s, %d CPUs", r.Config.Callers, runs(r.Config.Runs), r.Config.Duration, r.Env.CPU, r.Env.NumCPU),
		axis:   "payload bytes per second",
		groups: groups,
		series: series,
		label:  shortBytes,
		value: func(s, g int) (float64, string, bool) {
			c, ok := r.cell(series[s].name, r.Config.Sizes[g])
			if !ok {
				return 0, "", false
			}
			return c.BytesPerSec, fmt.Sprintf("%s, %s: %s, %s req/s, p50 %s", c.Contender, groups[g], bytesRate(c.BytesPerSec), rate(c.PerSec), dur(c.P50)), true
		},
	}
	return ch.write(w)
}

// shortBytes labels a byte rate on the chart (12.3MB/s).
func shortBytes(v float64) string {
	if v >= 1e9 {
		return strings.TrimSuffix(shortRate(v/1e3), "M") + "GB/s"
	}
	return shortRate(v) + "B/s"
}

// PayloadContenders are the contenders with an echo service, in table
// order: the payload mode's default.
func PayloadContenders() []Contender {
	var out []Contender
	for _, c := range Contenders {
		if _, ok := echoers[c.Name]; ok {
			out = append(out, c)
		}
	}
	return out
}

// payloadContenders selects the payload mode's contenders: those named
// (each must have an echo service), or every one that has.
func payloadContenders(names []string) ([]Contender, error) {
	if len(names) == 0 {
		return PayloadContenders(), nil
	}
	cs, err := selectContenders(names)
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		if _, err := echoerOf(c.Name); err != nil {
			return nil, fmt.Errorf("harness: %w (it has: %s)", err, strings.Join(echoNames(), ", "))
		}
	}
	return cs, nil
}

// echoNames names the contenders with an echo service, in table order.
func echoNames() []string {
	var out []string
	for _, c := range PayloadContenders() {
		out = append(out, c.Name)
	}
	return out
}
