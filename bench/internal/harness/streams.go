package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
)

// StreamsConfig is what [RunStreams] measures: server streams over one
// connection, every contender side by side.
type StreamsConfig struct {
	// Contenders names the contenders to run (all the streams mode has
	// when empty).
	Contenders []string
	// Streams lists the numbers of concurrent streams on the connection;
	// Sizes the message sizes in bytes (16 to 1 MiB).
	Streams, Sizes []int
	// Runs, Warmup and Duration are as in [Config]: each cell is run
	// Runs times, taking turns among the contenders, and the messages
	// received in the Duration after Warmup count.
	Runs             int
	Warmup, Duration time.Duration
	// Idle is the number of idle streams whose cost is measured (0:
	// none), for the contenders that take part in the idle mode.
	Idle int
	// CPUProfileDir, when set, receives a CPU profile of the client
	// process (client-streams.pprof) and of each server process
	// (server-stream-NAME.pprof), and heap profiles of the client's
	// allocations (client-streams-allocs.pprof).
	CPUProfileDir string
	// Log receives progress lines (nil: none); Stderr the server
	// processes' standard error (nil: the parent's).
	Log, Stderr io.Writer
	// Command is the command line printed in the report.
	Command string
}

// StreamsCell is the median of the runs of one contender with one number
// of streams and one message size.
type StreamsCell struct {
	Name, Contender string
	Streams, Size   int
	// MsgsPerSec is the messages received per second, all streams
	// together; BytesPerSec is MsgsPerSec times Size.
	MsgsPerSec, BytesPerSec float64
	// CPU is the median CPU time per message received of the server
	// process and of the client process, over the window.
	CPU CPUPerCall
	// Lost is the messages a lossy contender dropped, every run together.
	Lost       int64
	Errors     int
	FirstErr   string
	RunsPerSec []float64
}

// IdleCost is what the idle streams added to one side, per stream.
type IdleCost struct {
	Goroutines float64
	// Heap is the bytes of live heap objects (HeapAlloc after a
	// collection), Stack the bytes of goroutine stacks (StackInuse).
	Heap, Stack float64
}

// Total is the bytes per stream, heap and stacks together.
func (c IdleCost) Total() float64 { return c.Heap + c.Stack }

// IdleRow is one contender's idle streams.
type IdleRow struct {
	Name, Contender string
	Streams         int
	Server, Client  IdleCost
}

// StreamsReport is what [RunStreams] measured.
type StreamsReport struct {
	Env        Env
	Config     StreamsConfig
	Contenders []streamer
	Cells      []StreamsCell // by streams, then size, then contender order
	Idle       []IdleRow
	StartedAt  time.Time
	Elapsed    time.Duration
	LoadEnd    string
}

// streamSample is one run of one cell.
type streamSample struct {
	perSec float64
	lost   int64
	cpu    CPUPerCall
}

// RunStreams measures the idle streams' cost of the contenders that
// have idle streams, each against a fresh server process, then starts a
// streams server process per contender and measures every cell Runs
// times, taking turns among the contenders (each run starting with the
// next one).
func RunStreams(ctx context.Context, cfg StreamsConfig) (*StreamsReport, error) {
	cfg.Runs = max(cfg.Runs, 1)
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	for _, n := range cfg.Sizes {
		if n < minPayload || n > maxStreamMessage {
			return nil, fmt.Errorf("harness: streams of %d-byte messages: want %d to %d", n, minPayload, maxStreamMessage)
		}
	}
	for _, n := range cfg.Streams {
		if n <= 0 || n > 1<<12 {
			return nil, fmt.Errorf("harness: %d streams: want 1 to 4096", n)
		}
	}
	cs, err := selectStreamers(cfg.Contenders)
	if err != nil {
		return nil, err
	}
	logf := logger(cfg.Log)
	rep := &StreamsReport{Env: environment(), Config: cfg, Contenders: cs, StartedAt: time.Now()}
	if cfg.CPUProfileDir != "" {
		stop, err := profileClient(cfg.CPUProfileDir, "client-streams.pprof")
		if err != nil {
			return nil, err
		}
		defer stop()
		defer writeAllocs(cfg.CPUProfileDir, "client-streams-allocs.pprof", logf)
	}
	// The idle streams first, each contender in a server process and
	// over a connection of its own, so that neither side holds memory
	// from the runs.
	if cfg.Idle > 0 {
		for _, c := range cs {
			if !c.idle {
				continue
			}
			row, err := measureIdle(ctx, c, cfg.Idle, cfg.CPUProfileDir, cfg.Stderr)
			if err != nil {
				return nil, fmt.Errorf("%s, %d idle streams: %w", c.title, cfg.Idle, err)
			}
			logf("%-14s %d idle streams: server %.1f goroutines, %s heap, %s stacks per stream; client %.1f goroutines, %s heap, %s stacks",
				c.title, cfg.Idle, row.Server.Goroutines, bytesPer(row.Server.Heap), bytesPer(row.Server.Stack),
				row.Client.Goroutines, bytesPer(row.Client.Heap), bytesPer(row.Client.Stack))
			rep.Idle = append(rep.Idle, row)
		}
	}
	children := make([]*child, len(cs))
	clients := make([]StreamClient, len(cs))
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
		for _, c := range children {
			if c != nil {
				if err := c.stop(); err != nil {
					logf("%v", err)
				}
			}
		}
	}()
	for i, c := range cs {
		spec := ServerSpec{Contender: c.name, Role: RoleStream, Listen: "127.0.0.1:0"}
		if cfg.CPUProfileDir != "" {
			spec.CPUProfile = filepath.Join(cfg.CPUProfileDir, "server-stream-"+c.name+".pprof")
		}
		if children[i], err = startChild(ctx, spec, cfg.Stderr); err != nil {
			return nil, err
		}
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		clients[i], err = c.dial(dctx, children[i].addr)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%s streams: %w", c.title, err)
		}
		logf("%-14s streams server pid %d on %s", c.title, children[i].Pid(), children[i].addr)
	}
	for _, n := range cfg.Streams {
		for _, size := range cfg.Sizes {
			samples := make([][]streamSample, len(cs))
			errs := make([][]error, len(cs))
			for r := range cfg.Runs {
				for k := range cs {
					i := (k + r) % len(cs)
					c := cs[i]
					s, err := measureStreams(ctx, clients[i], c.lossy, n, size, cfg.Warmup, cfg.Duration, children[i].Pid())
					if ctx.Err() != nil {
						return nil, ctx.Err()
					}
					logf("%-14s %4d streams %8s  run %d/%d  %11s msg/s  %11s  lost %d  CPU/msg server %v client %v  err %v",
						c.title, n, Size(size), r+1, cfg.Runs, rate(s.perSec), bytesRate(s.perSec*float64(size)), s.lost, s.cpu.Server, s.cpu.Client, err)
					samples[i] = append(samples[i], s)
					errs[i] = append(errs[i], err)
				}
			}
			for i, c := range cs {
				rep.Cells = append(rep.Cells, streamsCellOf(c, n, size, samples[i], errs[i]))
			}
		}
	}
	rep.Elapsed = time.Since(rep.StartedAt)
	rep.LoadEnd = loadAverage()
	return rep, nil
}

// measureStreams opens n streams of size-byte messages over c and counts
// the messages received in the window after the warm-up, and the CPU
// time both processes spent in it.
func measureStreams(ctx context.Context, c StreamClient, lossy bool, n, size int, warmup, d time.Duration, pid int) (streamSample, error) {
	counts := newStreamCounts(n, size, lossy)
	run, err := c.Start(ctx, n, size, counts.got)
	if err != nil {
		return streamSample{}, err
	}
	var s streamSample
	err = func() error {
		if err := wait(ctx, warmup); err != nil {
			return err
		}
		m0, lost0 := counts.total()
		c0, t0 := selfCPU(), time.Now()
		s0, err := processCPU(pid)
		if err != nil {
			return err
		}
		if err := wait(ctx, d); err != nil {
			return err
		}
		m1, lost1 := counts.total()
		c1, t1 := selfCPU(), time.Now()
		s1, err := processCPU(pid)
		if err != nil {
			return err
		}
		msgs := m1 - m0
		if msgs <= 0 {
			return fmt.Errorf("no message received in %v", t1.Sub(t0))
		}
		s.perSec = float64(msgs) / t1.Sub(t0).Seconds()
		s.lost = lost1 - lost0
		s.cpu = CPUPerCall{Server: (s1 - s0) / time.Duration(msgs), Client: (c1 - c0) / time.Duration(msgs)}
		return nil
	}()
	if serr := run.Stop(); err == nil {
		err = serr
	}
	return s, err
}

// wait waits for d or the end of ctx.
func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// streamsCellOf takes the median rate and CPU times of a cell's runs; a
// run that failed counts as an error and not in the medians.
func streamsCellOf(c streamer, n, size int, samples []streamSample, errs []error) StreamsCell {
	cell := StreamsCell{Name: c.name, Contender: c.title, Streams: n, Size: size}
	var cpus []CPUPerCall
	for i, s := range samples {
		if errs[i] != nil {
			cell.Errors++
			if cell.FirstErr == "" {
				cell.FirstErr = errs[i].Error()
			}
			continue
		}
		cell.RunsPerSec = append(cell.RunsPerSec, s.perSec)
		cell.Lost += s.lost
		cpus = append(cpus, s.cpu)
	}
	cell.MsgsPerSec = benchkit.Median(cell.RunsPerSec)
	cell.BytesPerSec = cell.MsgsPerSec * float64(size)
	cell.CPU = medianCPU(cpus)
	return cell
}

// selectStreamers returns the streams mode's contenders named (all when
// none), in table order.
func selectStreamers(names []string) ([]streamer, error) {
	if len(names) == 0 {
		return streamers, nil
	}
	for _, n := range names {
		if _, err := streamerOf(n); err != nil {
			return nil, fmt.Errorf("harness: %w", err)
		}
	}
	var out []streamer
	for _, s := range streamers {
		for _, n := range names {
			if s.name == n {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

// serveStream is [serve] for [RoleStream]: it writes the address, then
// answers the control queries ("mem", and "streams": how many streams
// the server has open) until in reaches EOF.
func serveStream(s ServerSpec, in io.Reader, out io.Writer) error {
	c, err := streamerOf(s.Contender)
	if err != nil {
		return err
	}
	if s.MemProfileAll {
		runtime.MemProfileRate = 1
	}
	if s.CPUProfile != "" {
		stop, err := profileClient(filepath.Dir(s.CPUProfile), filepath.Base(s.CPUProfile))
		if err != nil {
			return err
		}
		defer stop()
		defer writeAllocs(filepath.Dir(s.CPUProfile), strings.TrimSuffix(filepath.Base(s.CPUProfile), ".pprof")+"-allocs.pprof", nil)
	}
	var src streamSource
	srv, err := c.serve(s.Listen, &src)
	if err != nil {
		return err
	}
	defer srv.Close()
	if _, err := fmt.Fprintln(out, srv.Addr()); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		q := strings.TrimSpace(sc.Text())
		answer := answerControl(q)
		if q == queryStreams {
			answer = answerStreams + strconv.FormatInt(src.open.Load(), 10)
		}
		if path, ok := strings.CutPrefix(q, queryHeap); ok {
			answer = answerHeap + "ok"
			if err := writeHeap(path); err != nil {
				answer = answerHeap + err.Error()
			}
		}
		if _, err := fmt.Fprintln(out, answer); err != nil {
			return err
		}
	}
	return sc.Err()
}

// The queries of a streams server's control protocol: "streams" asks
// how many streams it has open, "heap PATH" has it write its heap
// profile (after a collection) into PATH.
const (
	queryStreams  = "streams"
	answerStreams = "streams "
	queryHeap     = "heap "
	answerHeap    = "heap "
)

// openStreams asks the child how many streams it has open.
func (c *child) openStreams(ctx context.Context) (int64, error) {
	l, err := c.Ask(ctx, queryStreams, 10*time.Second)
	if err != nil {
		return 0, err
	}
	n, ok := strings.CutPrefix(l, answerStreams)
	if !ok {
		return 0, fmt.Errorf("%s answered %q to %q", c.Name(), l, queryStreams)
	}
	return strconv.ParseInt(n, 10, 64)
}
