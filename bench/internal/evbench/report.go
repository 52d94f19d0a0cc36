package evbench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
	"github.com/wizardmesh/wizard/bench/internal/harness"
)

// WriteMarkdown writes the report: the settings, a table per number of
// groups and members, the paired ratios, the targets.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "# Events: emit to groups\n\n")
	fmt.Fprintf(&b, "`%s` — %s, %d runs per cell (median), %v window after %v warm-up, contenders taking turns run by run.\n\n",
		c.Command, r.StartedAt.UTC().Format("2006-01-02 15:04 UTC"), c.Runs, c.Duration, c.Warmup)
	e := r.Env
	fmt.Fprintf(&b, "Machine: %s, %d CPUs (GOMAXPROCS %d), %s %s/%s; commit %s; load average %s at the start, %s at the end; took %v.\n\n",
		e.CPU, e.NumCPU, e.GOMAXPROCS, e.GoVersion, e.OS, e.Arch, e.Commit, e.LoadStart, r.LoadEnd, r.Elapsed.Round(time.Second))
	b.WriteString("events/s counts the events every group handled, per second of the window (each event runs once in each group); " +
		"latency is from the emitter's stamp to the member's handler starting (the same machine's wall clock), " +
		"p50 and p99 over every member's events in the window, within 5%. CPU/event is each side's CPU time in the window " +
		"divided by the events (the members summed; the broker's apart); allocs/event likewise, from the Go processes' " +
		"runtime.MemStats.Mallocs. lost: events emitted that some group had not handled once the emitters stopped and the " +
		"members were let catch up (a lossy contender's count standing still for 500 ms; the others' up to 60 s), all runs together. " +
		"Where the emitter outruns the members (fire and forget, or a stream taking events faster than its consumers), events queue " +
		"and the latency is mostly the queue's: the events/s are still what the members handled.\n\n")
	for _, m := range r.Measured {
		fmt.Fprintf(&b, "- **%s** (`%s`): %s.\n", m.title, m.name, m.note)
	}
	for _, g := range r.Gaps {
		fmt.Fprintf(&b, "- **%s**: not measured: %s.\n", g[0], g[1])
	}
	b.WriteString("\n| groups × members | emitters | contender | events/s | vs Moleculer | p50 | p99 | CPU/event emitter | members | broker | allocs/event emitter | members | lost | errors |\n")
	b.WriteString("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, cell := range r.Cells {
		vs := "—"
		if m := r.cell("moleculer", cell.Groups, cell.Members, cell.Emitters); m != nil && m.EventsPerSec > 0 {
			vs = fmt.Sprintf("%.2fx", cell.EventsPerSec/m.EventsPerSec)
		}
		allocE, allocS := "—", "—"
		if c, err := contenderOf(cell.Name); err == nil && !c.node {
			allocE, allocS = fmt.Sprintf("%.1f", cell.AllocsEmitter), fmt.Sprintf("%.1f", cell.AllocsSubs)
		}
		br := "—"
		if cell.CPUBr > 0 {
			br = us(cell.CPUBr)
		}
		errs := fmt.Sprint(cell.Errors)
		if cell.FirstErr != "" {
			errs += ": " + strings.ReplaceAll(cell.FirstErr, "|", "\\|")
		}
		fmt.Fprintf(&b, "| %d × %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s |\n",
			cell.Groups, cell.Members, cell.Emitters, cell.Title, harness.Rate(cell.EventsPerSec), vs, us(cell.P50), us(cell.P99),
			us(cell.CPUEmitter), us(cell.CPUSubs), br, allocE, allocS, cell.Lost, errs)
	}
	b.WriteString("\n")
	if t := r.targets(); len(t) > 0 {
		b.WriteString("Issue 31's targets, each as the median of the paired runs' ratios (run k of one against run k of the other, " +
			"taken one after the other), with their range: absolute figures drift on a shared 2-core machine, ratios within a run less.\n\n")
		b.WriteString("| target | groups × members | emitters | ratio (median) | runs' ratios | met |\n|---|---|---:|---:|---|---|\n")
		for _, l := range t {
			b.WriteString(l)
		}
		b.WriteString("\n")
	}
	b.WriteString("Every run's events/s:\n\n| groups × members | emitters | contender | runs |\n|---|---:|---|---|\n")
	for _, cell := range r.Cells {
		var rs []string
		for _, v := range cell.Runs {
			rs = append(rs, harness.Rate(v))
		}
		fmt.Fprintf(&b, "| %d × %d | %d | %s | %s |\n", cell.Groups, cell.Members, cell.Emitters, cell.Title, strings.Join(rs, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func us(d time.Duration) string {
	switch {
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.1f µs", float64(d)/1e3)
}

func (r *Report) cell(name string, g, m, n int) *Cell {
	for i := range r.Cells {
		c := &r.Cells[i]
		if c.Name == name && c.Groups == g && c.Members == m && c.Emitters == n {
			return c
		}
	}
	return nil
}

// pairedRatio returns the median and the sorted list of a's runs over b's,
// run by run.
func pairedRatio(a, b *Cell) (float64, []float64) {
	var rs []float64
	for i := range min(len(a.Runs), len(b.Runs)) {
		if b.Runs[i] > 0 {
			rs = append(rs, a.Runs[i]/b.Runs[i])
		}
	}
	slices.Sort(rs)
	return benchkit.Median(rs), rs
}

// targets are issue 31's: the mesh's emit at least twice Moleculer's
// events/s; wizard's durable events at least 0.8x nats.go's JetStream.
func (r *Report) targets() []string {
	var out []string
	row := func(what string, a, b *Cell, want float64) {
		med, rs := pairedRatio(a, b)
		var s []string
		for _, v := range rs {
			s = append(s, fmt.Sprintf("%.2f", v))
		}
		met := "no"
		if med >= want {
			met = "yes"
		}
		out = append(out, fmt.Sprintf("| %s | %d × %d | %d | %.2fx | %s | %s |\n", what, a.Groups, a.Members, a.Emitters, med, strings.Join(s, ", "), met))
	}
	for _, c := range r.Cells {
		switch c.Name {
		case "wizard-mesh", "wizard-mesh-noreply":
			if m := r.cell("moleculer", c.Groups, c.Members, c.Emitters); m != nil {
				row(c.Title+" ≥ 2x Moleculer emit's events/s", &c, m, 2)
			}
		case "wizard-durable", "wizard-durable-alo":
			if j := r.cell("jetstream", c.Groups, c.Members, c.Emitters); j != nil {
				row(c.Title+" ≥ 0.8x nats.go JetStream's events/s", &c, j, 0.8)
			}
		}
	}
	return out
}

// WriteSVG draws events/s per contender, a group of bars per setting.
func (r *Report) WriteSVG(w io.Writer) error {
	type key struct{ g, m, n int }
	var keys []key
	for _, c := range r.Cells {
		k := key{c.Groups, c.Members, c.Emitters}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	var groups []string
	for _, k := range keys {
		groups = append(groups, fmt.Sprintf("%d group(s) × %d, %d emitter(s)", k.g, k.m, k.n))
	}
	var series []harness.ChartSeries
	for _, c := range r.Measured {
		series = append(series, harness.ChartSeries{Name: c.name, Title: c.title})
	}
	return harness.WriteGroupedChart(w, "Events per second, emit to groups (issue 31)",
		fmt.Sprintf("each group handles each event once; median of %d runs; %s", r.Config.Runs, r.Env.Commit), "events/s",
		groups, series, harness.ShortRate, func(s, g int) (float64, string, bool) {
			c := r.cell(r.Measured[s].name, keys[g].g, keys[g].m, keys[g].n)
			if c == nil {
				return 0, "", false
			}
			return c.EventsPerSec, fmt.Sprintf("%s: %s events/s, p99 %s", c.Title, harness.Rate(c.EventsPerSec), us(c.P99)), true
		})
}
