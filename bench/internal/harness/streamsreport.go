package harness

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The bars for streams.
const (
	streamsMsgsTarget  = 2.0     // wizard TCP's msgs/s at 16 B against gRPC-go's
	streamsBytesTarget = 0.8     // wizard TCP's bytes/s at 64 KiB against the floor's
	idleStreamTarget   = 2 << 10 // bytes per idle stream, each side
)

// wizardStreamsName is the contender the targets are about.
const wizardStreamsName = "wizard-tcp"

// cell returns the cell of contender name with n streams of size bytes.
func (r *StreamsReport) cell(name string, n, size int) (StreamsCell, bool) {
	for _, c := range r.Cells {
		if c.Name == name && c.Streams == n && c.Size == size {
			return c, true
		}
	}
	return StreamsCell{}, false
}

func (r *StreamsReport) idleRow(name string) (IdleRow, bool) {
	for _, row := range r.Idle {
		if row.Name == name {
			return row, true
		}
	}
	return IdleRow{}, false
}

// WriteMarkdown writes the streams section: the table, the idle streams'
// cost, the targets and notes.
func (r *StreamsReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	cfg := r.Config
	fmt.Fprintf(&b, "# Streams: server-streaming messages over one connection\n\n")
	writeRunHeader(&b, cfg.Command, r.Env, r.StartedAt, r.Elapsed, r.LoadEnd)
	fmt.Fprintf(&b, "Each contender serves one server-streaming method: the caller opens the streams over its one connection, each asking for "+
		"messages of a size, and the server sends them as fast as the contender's flow control lets it while the caller receives and counts; "+
		"every message's stamps (its number at both ends) are checked. msgs/s counts the messages received in a %v window after %v of warm-up, "+
		"all streams together; MB/s is msgs/s times the message size. Each cell is the median of %s, the contenders taking turns "+
		"(each run starting with the next one). CPU/msg is the user and system time of the server process and of the client process "+
		"over the window divided by its messages.\n\n", cfg.Duration, cfg.Warmup, runs(cfg.Runs))
	fmt.Fprintf(&b, "| streams | message | contender | msgs/s | MB/s | msgs/s vs gRPC-go | bytes/s vs floor | wizard TCP vs this | server CPU/msg | client CPU/msg |\n")
	fmt.Fprintf(&b, "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range r.Cells {
		g, gok := r.cell(gRPCName, c.Streams, c.Size)
		f, fok := r.cell(floorName, c.Streams, c.Size)
		wz, wok := r.cell(wizardStreamsName, c.Streams, c.Size)
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.Streams, Size(c.Size), c.Contender, rate(c.MsgsPerSec),
			strconv.FormatFloat(c.BytesPerSec/1e6, 'f', 1, 64), ratioIf(gok, c.MsgsPerSec, g.MsgsPerSec), ratioIf(fok, c.BytesPerSec, f.BytesPerSec),
			ratioIf(wok, wz.MsgsPerSec, c.MsgsPerSec), cpuDur(c.CPU.Server), cpuDur(c.CPU.Client))
	}
	b.WriteString("\n")
	if len(r.Idle) > 0 {
		fmt.Fprintf(&b, "## Idle streams\n\n%d streams opened over the one connection, each asking for nothing: the server's handler takes the "+
			"request and waits for the stream's end, the caller holds the stream without receiving. Per stream, what they added to each side "+
			"once the server held them all open, against the same side before, each read after a collection: goroutines, live heap "+
			"(runtime.MemStats.HeapAlloc) and goroutine stacks (StackInuse).\n\n", cfg.Idle)
		fmt.Fprintf(&b, "| contender | server goroutines | server heap | server stacks | server total | client goroutines | client heap | client stacks | client total |\n")
		fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, row := range r.Idle {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", row.Contender,
				strconv.FormatFloat(row.Server.Goroutines, 'f', 2, 64), bytesPer(row.Server.Heap), bytesPer(row.Server.Stack), bytesPer(row.Server.Total()),
				strconv.FormatFloat(row.Client.Goroutines, 'f', 2, 64), bytesPer(row.Client.Heap), bytesPer(row.Client.Stack), bytesPer(row.Client.Total()))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "| target | measured | met |\n|---|---:|---|\n")
	for _, t := range r.targets() {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", t.what, t.measured, t.met)
	}
	b.WriteString("\n")
	if cfg.Runs > 1 {
		fmt.Fprintf(&b, "<details><summary>Every run (msgs/s)</summary>\n\n| streams | message | contender | runs |\n|---:|---:|---|---|\n")
		for _, c := range r.Cells {
			rs := make([]string, len(c.RunsPerSec))
			for i, v := range c.RunsPerSec {
				rs[i] = rate(v)
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %s |\n", c.Streams, Size(c.Size), c.Contender, strings.Join(rs, " · "))
		}
		fmt.Fprintf(&b, "\n</details>\n\n")
	}
	fmt.Fprintf(&b, "Notes:\n\n")
	for _, c := range r.Contenders {
		fmt.Fprintf(&b, "- **%s**: %s.\n", c.title, c.note)
	}
	for _, c := range r.Cells {
		if c.Lost > 0 {
			fmt.Fprintf(&b, "- **%s, %d streams of %s: %s messages lost** over the runs, beside the ones counted.\n", c.Contender, c.Streams, Size(c.Size), rate(float64(c.Lost)))
		}
		if c.Errors > 0 {
			fmt.Fprintf(&b, "- **%s, %d streams of %s: %d runs failed** (first: %s).\n", c.Contender, c.Streams, Size(c.Size), c.Errors, c.FirstErr)
		}
	}
	if cfg.CPUProfileDir != "" {
		fmt.Fprintf(&b, "- CPU and allocation profiles of the client and server processes are in %s; profiling costs a few percent everywhere.\n", cfg.CPUProfileDir)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// bytesPer formats bytes per stream.
func bytesPer(v float64) string {
	if v < 0 {
		return "-" + bytesPer(-v)
	}
	if v >= 1<<10 {
		return strconv.FormatFloat(v/(1<<10), 'f', 2, 64) + " KiB"
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + " B"
}

// targets checks the bars against the run, for every number of
// streams it measured.
func (r *StreamsReport) targets() []target {
	var out []target
	// x formats a ratio, with a third decimal when two would round it
	// onto the target it misses.
	x := func(v, want float64) string {
		s := strconv.FormatFloat(v, 'f', 2, 64)
		if v < want && s == strconv.FormatFloat(want, 'f', 2, 64) {
			s = strconv.FormatFloat(v, 'f', 3, 64)
		}
		return s + "x"
	}
	ratio := func(what string, a, b float64, aok, bok bool, want float64) {
		t := target{what: what, measured: "not measured", met: "—"}
		if aok && bok && b > 0 {
			t.measured, t.met = x(a/b, want), yesNo(a/b >= want)
		}
		out = append(out, t)
	}
	for _, n := range r.Config.Streams {
		w, wok := r.cell(wizardStreamsName, n, 16)
		g, gok := r.cell(gRPCName, n, 16)
		ratio(fmt.Sprintf("wizard TCP, %d stream(s) of 16 B: msgs/s ≥ %.0fx gRPC-go's", n, streamsMsgsTarget), w.MsgsPerSec, g.MsgsPerSec, wok, gok, streamsMsgsTarget)
	}
	for _, n := range r.Config.Streams {
		w, wok := r.cell(wizardStreamsName, n, 64<<10)
		f, fok := r.cell(floorName, n, 64<<10)
		ratio(fmt.Sprintf("wizard TCP, %d stream(s) of 64 KiB: bytes/s ≥ %.1fx the floor's", n, streamsBytesTarget), w.BytesPerSec, f.BytesPerSec, wok, fok, streamsBytesTarget)
	}
	row, ok := r.idleRow(wizardStreamsName)
	for _, side := range []struct {
		name string
		cost IdleCost
	}{{"server", row.Server}, {"client", row.Client}} {
		t := target{what: fmt.Sprintf("wizard TCP: an idle stream costs ≤ 2 KiB on the %s", side.name), measured: "not measured", met: "—"}
		if ok {
			t.measured, t.met = bytesPer(side.cost.Total()), yesNo(side.cost.Total() <= idleStreamTarget)
		}
		out = append(out, t)
	}
	return out
}

// WriteSVG draws msgs/s per contender, one group per number of streams
// and message size.
func (r *StreamsReport) WriteSVG(w io.Writer) error {
	type group struct{ n, size int }
	var groups []group
	var labels []string
	for _, n := range r.Config.Streams {
		for _, size := range r.Config.Sizes {
			groups = append(groups, group{n, size})
			s := "streams"
			if n == 1 {
				s = "stream"
			}
			labels = append(labels, fmt.Sprintf("%d %s of %s", n, s, Size(size)))
		}
	}
	var series []chartSeries
	for _, c := range r.Contenders {
		series = append(series, chartSeries{name: c.name, title: c.title})
	}
	ch := groupedChart{
		title:  "Server-streaming messages per second over one connection (log scale, higher is better)",
		sub:    fmt.Sprintf("server in its own process on 127.0.0.1; median of %s of %v; %s, %d CPUs", runs(r.Config.Runs), r.Config.Duration, r.Env.CPU, r.Env.NumCPU),
		axis:   "messages per second",
		groups: labels,
		series: series,
		label:  shortRate,
		value: func(s, g int) (float64, string, bool) {
			c, ok := r.cell(series[s].name, groups[g].n, groups[g].size)
			if !ok || c.MsgsPerSec == 0 {
				return 0, "", false
			}
			return c.MsgsPerSec, fmt.Sprintf("%s, %s: %s msgs/s, %s", c.Contender, labels[g], rate(c.MsgsPerSec), bytesRate(c.BytesPerSec)), true
		},
	}
	return ch.write(w)
}
