package harness

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// WriteMarkdown writes the report as Markdown: the comparison table, the
// two-hop table, the targets against what was measured, and notes.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	cfg := r.Config
	fmt.Fprintf(&b, "# wizard vs gRPC-go, HTTP/1.1, MicroWizard, Moleculer, drpc, connect-go, NATS and a raw TCP floor\n\n")
	if cfg.Command != "" {
		fmt.Fprintf(&b, "Command: `%s`  \n", cfg.Command)
	}
	e := r.Env
	fmt.Fprintf(&b, "Machine: %s, %d CPUs, GOMAXPROCS %d in every process, %s %s/%s", cmp.Or(e.CPU, "unknown CPU"), e.NumCPU, e.GOMAXPROCS, e.GoVersion, e.OS, e.Arch)
	if e.Commit != "" {
		fmt.Fprintf(&b, ", wizard at %s", e.Commit)
	}
	fmt.Fprintf(&b, "  \nStarted %s, took %v; load average %s at the start, %s at the end.\n\n",
		r.StartedAt.UTC().Format(time.RFC3339), r.Elapsed.Round(time.Second), cmp.Or(e.LoadStart, "?"), cmp.Or(r.LoadEnd, "?"))
	fmt.Fprintf(&b, "Each server runs in its own OS process on 127.0.0.1; the client process drives it over one connection, "+
		"except HTTP/1.1 and drpc, which cannot carry concurrent calls on one and run over their keep-alive pools as their users do. "+
		"Every peer's row is its recommended setup; rows marked (extra) are handicapped setups kept to show what the handicap costs "+
		"(see the notes). "+
		"Each cell is the median of %s (req/s, p50 and p99 each taken separately); a run counts the calls that complete "+
		"in a %v window after %v of warm-up. Latency is per call, as the caller sees it.\n\n", runs(cfg.Runs), cfg.Duration, cfg.Warmup)

	if len(r.Cells) > 0 {
		fmt.Fprintf(&b, "## Unary {a, b} -> {r}\n\n")
		fmt.Fprintf(&b, "| callers | contender | req/s | p50 | p99 | req/s vs gRPC-go | p50 vs gRPC-go | req/s vs floor | wizard TCP's req/s vs this |\n")
		fmt.Fprintf(&b, "|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, c := range r.Cells {
			g, gok := r.cell(gRPCName, c.Callers)
			f, fok := r.cell(floorName, c.Callers)
			w, wok := r.cell("wizard-tcp", c.Callers)
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.Callers, c.Contender, rate(c.PerSec), dur(c.P50), dur(c.P99),
				ratioIf(gok, c.PerSec, g.PerSec), ratioIf(gok, float64(c.P50), float64(g.P50)), ratioIf(fok, c.PerSec, f.PerSec), ratioIf(wok, w.PerSec, c.PerSec))
		}
		b.WriteString("\n")
	}
	for _, g := range r.Gaps {
		fmt.Fprintf(&b, "**Not measured: %s** — %s.\n\n", g.Title, g.Reason)
	}

	r.writeContenders(&b)
	r.writeInProcess(&b)

	if len(r.Hops) > 0 {
		fmt.Fprintf(&b, "## Two hops: the seed article's scenario\n\n")
		fmt.Fprintf(&b, "%d callers -> service A -> service B; B answers after a %v timer; A and B are separate processes. "+
			"The first row is the timer alone in the caller's process: what Go's timers add before any network.\n\n", cfg.HopsCallers, cfg.HopsDelay)
		fmt.Fprintf(&b, "| contender | req/s | p50 | p99 | p50 above %v | p50 above the timer alone |\n|---|---:|---:|---:|---:|---:|\n", cfg.HopsDelay)
		base, _ := r.hop(sleepName)
		for _, c := range r.Hops {
			above := "—"
			if c.Name != sleepName {
				above = dur(c.P50 - base.P50)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", c.Contender, rate(c.PerSec), dur(c.P50), dur(c.P99), dur(c.P50-cfg.HopsDelay), above)
		}
		b.WriteString("\n")
	}

	if len(r.Cluster) > 0 {
		r.writeCluster(&b)
	}

	if t := r.targets(); len(t) > 0 {
		fmt.Fprintf(&b, "## Targets (issue 33, performance round three), against this run\n\n| target | measured | met |\n|---|---:|---|\n")
		for _, t := range t {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", t.what, t.measured, t.met)
		}
		b.WriteString("\n")
	}

	if r.Config.Runs > 1 {
		fmt.Fprintf(&b, "<details><summary>Every run (req/s, p50, p99), to judge the spread behind each median</summary>\n\n")
		fmt.Fprintf(&b, "| callers | contender | runs |\n|---:|---|---|\n")
		for _, c := range r.Cells {
			fmt.Fprintf(&b, "| %d | %s | %s |\n", c.Callers, c.Contender, everyRun(c.Runs))
		}
		for _, c := range r.InProcess {
			fmt.Fprintf(&b, "| %d, in-process | %s | %s |\n", c.Callers, c.Contender, everyRun(c.Runs))
		}
		for _, c := range r.Hops {
			fmt.Fprintf(&b, "| %d, two hops | %s | %s |\n", c.Callers, c.Contender, everyRun(c.Runs))
		}
		for _, c := range r.Cluster {
			fmt.Fprintf(&b, "| %d, cluster | %s | %s |\n", c.Callers, c.Contender, everyRun(c.Runs))
		}
		fmt.Fprintf(&b, "\n</details>\n\n")
	}

	fmt.Fprintf(&b, "## Notes\n\n")
	for _, c := range r.Contenders {
		fmt.Fprintf(&b, "- **%s**: %s.\n", c.Title, c.Note)
		if strings.Contains(c.Name, "quic") && r.Env.UDPBuffers != "" {
			fmt.Fprintf(&b, "  UDP socket buffers on this machine: %s (quic-go asks for 7 MiB each way).\n", r.Env.UDPBuffers)
		}
	}
	fmt.Fprintf(&b, "- Every contender carries the same call: protobuf AddRequest{a, b} -> AddResponse{sum} "+
		"(examples/gen/math/v1) for wizard, gRPC-go, drpc, connect-go and NATS micro, the JSON {\"a\", \"b\"} -> {\"r\"} for HTTP, "+
		"MicroWizard (and wizard on its wire) and Moleculer, raw float64s for the floor; every answer is checked (by the Node.js client "+
		"processes too). A row's title says who serves ← who calls where it is not the Go load generator with the contender's own client.\n")
	if len(r.Hops) > 0 {
		fmt.Fprintf(&b, "- Two hops: every contender but HTTP/1.1 uses one connection per hop; HTTP/1.1 uses a pool of keep-alive connections "+
			"on both hops (with one connection, 50 callers would queue behind each 10 ms answer).\n")
	}
	if len(r.Cluster) > 0 {
		fmt.Fprintf(&b, "- Cluster: A calls the replicas as in the two-hop scenario (wizard TCP and QUIC, gRPC-go and the floor over one "+
			"connection per replica, HTTP/1.1 over a pool of keep-alive connections per replica); wizard's node gets the replicas' "+
			"addresses through runtime.StaticPeers and balances with its default balancer, gRPC-go gets them from a resolver/manual resolver "+
			"with the service config %s; HTTP/1.1 and the floor have no balancer of their own, so the harness goes round robin over "+
			"one client per replica. Each B counts the calls its handler answered; the parent reads the counts over the child's stdin "+
			"and stdout before the first run and after the last.\n", "`"+grpcRoundRobin+"`")
	}
	cells := append(append(append([]Cell(nil), r.Cells...), r.InProcess...), r.Hops...)
	for _, c := range r.Cluster {
		cells = append(cells, c.Cell)
	}
	for _, c := range cells {
		if c.Errors > 0 {
			fmt.Fprintf(&b, "- **%s, %d callers: %d errors** (first: %s).\n", c.Contender, c.Callers, c.Errors, c.FirstErr)
		}
	}
	if cfg.CPUProfileDir != "" {
		fmt.Fprintf(&b, "- CPU profiles of the client and server processes are in %s; profiling costs a few percent everywhere.\n", cfg.CPUProfileDir)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeCluster writes the cluster scenario's section.
func (r *Report) writeCluster(b *strings.Builder) {
	cfg := r.Config
	fmt.Fprintf(b, "## Cluster: %d replicas of B behind A's balancer\n\n", cfg.ClusterReplicas)
	fmt.Fprintf(b, "The seed article's cluster: %d callers -> service A -> %d replicas of service B, each B answering after a %v timer, "+
		"every service its own process; A's client spreads its calls over the replicas with the balancer named in the table. "+
		"The last columns count the calls each replica answered over the %s (warm-ups included) and their spread, "+
		"(busiest - idlest) / mean.\n\n", cfg.ClusterCallers, cfg.ClusterReplicas, cfg.ClusterDelay, runs(cfg.Runs))
	fmt.Fprintf(b, "| contender | balancer | req/s | p50 | p99 | p50 above %v | calls served by B1 · B2 · … | spread |\n", cfg.ClusterDelay)
	fmt.Fprintf(b, "|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range r.Cluster {
		served := make([]string, len(c.Served))
		for i, n := range c.Served {
			served[i] = rate(float64(n))
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", c.Contender, c.Balancer, rate(c.PerSec), dur(c.P50), dur(c.P99),
			dur(c.P50-cfg.ClusterDelay), strings.Join(served, " · "), strconv.FormatFloat(100*c.Spread(), 'f', 1, 64)+"%")
	}
	b.WriteString("\n")
	b.WriteString(r.clusterSummary())
	b.WriteString("\n\n")
}

// clusterSummary says in one sentence what the cluster table shows.
func (r *Report) clusterSummary() string {
	cfg := r.Config
	worst := 0.0
	for _, c := range r.Cluster {
		worst = max(worst, c.Spread())
	}
	s := fmt.Sprintf("Every balancer spread the calls evenly (a spread of %.1f%% at most), and with %d callers each waiting about %v "+
		"the rate is bounded near %s req/s whatever the stack, so the latency above the timer is what each stack's two hops and balancer cost",
		100*worst, cfg.ClusterCallers, cfg.ClusterDelay, rate(float64(cfg.ClusterCallers)/cfg.ClusterDelay.Seconds()))
	w, wok := r.clusterRow("wizard-tcp")
	g, gok := r.clusterRow(gRPCName)
	if wok && gok {
		s += fmt.Sprintf(": %s for wizard TCP against %s for gRPC-go at the median, %s against %s at p99",
			dur(w.P50-cfg.ClusterDelay), dur(g.P50-cfg.ClusterDelay), dur(w.P99-cfg.ClusterDelay), dur(g.P99-cfg.ClusterDelay))
	}
	return s + "."
}

func (r *Report) clusterRow(name string) (ClusterRow, bool) {
	for _, c := range r.Cluster {
		if c.Name == name {
			return c, true
		}
	}
	return ClusterRow{}, false
}

// cell returns the cell of contender name at callers.
func (r *Report) cell(name string, callers int) (Cell, bool) {
	for _, c := range r.Cells {
		if c.Name == name && c.Callers == callers {
			return c, true
		}
	}
	return Cell{}, false
}

func (r *Report) hop(name string) (Cell, bool) {
	for _, c := range r.Hops {
		if c.Name == name {
			return c, true
		}
	}
	return Cell{}, false
}

type target struct{ what, measured, met string }

// targets checks issue 33's targets (performance, round three) against
// the report; a target whose contenders were not measured says so. A
// target "in every paired run" compares run i of one contender with run
// i of the other (the runs interleave the contenders) and is met only if
// every pair meets it; the figure is the median of the pairs' ratios,
// with their range.
func (r *Report) targets() []target {
	var ts []target
	add := func(what, measured string, met bool, ok bool) {
		t := target{what: what, measured: "not measured", met: "—"}
		if ok {
			t.measured, t.met = measured, yesNo(met)
		}
		ts = append(ts, t)
	}
	x := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + "x" }
	// ratio is a's req/s over b's, or their p50s with p50.
	ratio := func(a, b Cell, p50 bool) float64 {
		if p50 {
			return float64(a.P50) / float64(b.P50)
		}
		return a.PerSec / b.PerSec
	}
	atLeast := func(what, a, b string, callers int, want float64) {
		ca, ok1 := r.cell(a, callers)
		cb, ok2 := r.cell(b, callers)
		got := ratio(ca, cb, false)
		add(what, x(got), got >= want, ok1 && ok2 && cb.PerSec > 0)
	}
	// paired is the median and range of the per-run ratios of a to b.
	paired := func(what, a, b string, callers int, want float64) {
		ca, ok1 := r.cell(a, callers)
		cb, ok2 := r.cell(b, callers)
		n := min(len(ca.Runs), len(cb.Runs))
		if !ok1 || !ok2 || n == 0 {
			add(what, "", false, false)
			return
		}
		rs := make([]float64, 0, n)
		for i := range n {
			if cb.Runs[i].PerSec > 0 {
				rs = append(rs, ca.Runs[i].PerSec/cb.Runs[i].PerSec)
			}
		}
		if len(rs) == 0 {
			add(what, "", false, false)
			return
		}
		slices.Sort(rs)
		m := fmt.Sprintf("%s (%d runs: %s–%s)", x(rs[len(rs)/2]), len(rs), x(rs[0]), x(rs[len(rs)-1]))
		add(what, m, rs[0] >= want, true)
	}
	if len(r.Cells) > 0 {
		const mw = "microwizard-node"
		paired("1 caller: wizard TCP vs MicroWizard → MicroWizard, req/s ≥ 1.5x in every paired run", "wizard-tcp", mw, 1, 1.5)
		t1, ok1 := r.cell("wizard-tcp", 1)
		f1, ok2 := r.cell(floorName, 1)
		p := ratio(t1, f1, true)
		add("1 caller: wizard TCP p50 ≤ 1.15x the floor's", fmt.Sprintf("%s (%s / %s)", x(p), dur(t1.P50), dur(f1.P50)), p <= 1.15, ok1 && ok2 && f1.P50 > 0)
		paired("16 callers: wizard TCP vs MicroWizard → MicroWizard, req/s ≥ 2x in every paired run", "wizard-tcp", mw, 16, 2)
		atLeast("128 callers: wizard TCP req/s ≥ 0.65x the floor's", "wizard-tcp", floorName, 128, 0.65)
		atLeast("1,024 callers: wizard TCP req/s ≥ 0.55x the floor's", "wizard-tcp", floorName, 1024, 0.55)
		t128, ok1 := r.cell("wizard-tcp", 128)
		t1024, ok2 := r.cell("wizard-tcp", 1024)
		add("wizard TCP: no drop in req/s from 128 to 1,024 callers", rate(t128.PerSec)+" → "+rate(t1024.PerSec), t1024.PerSec >= t128.PerSec, ok1 && ok2)
		atLeast("128 callers: wizard QUIC req/s ≥ 0.45x the TCP floor's", "wizard-quic", floorName, 128, 0.45)
		q, ok1 := r.cell("wizard-quic", 128)
		qf, ok2 := r.cell(quicFloorName, 128)
		ts = append(ts, target{what: "128 callers: wizard QUIC req/s vs the QUIC floor's (reported)", measured: "not measured", met: "—"})
		if ok1 && ok2 && qf.PerSec > 0 {
			ts[len(ts)-1].measured = x(ratio(q, qf, false))
		}
		for _, n := range []int{1, 128, 1024} {
			atLeast(fmt.Sprintf("%s: wizard NATS req/s ≥ 1x NATS micro's", callersOf(n)), "wizard-nats", "nats-micro", n, 1)
		}
	}
	for _, n := range []int{1, 16} {
		w, ok1 := r.inProcess(wizardCallName, n)
		m, ok2 := r.inProcess("microwizard-acte", n)
		if !ok1 && !ok2 && len(r.InProcess) == 0 {
			break
		}
		got := ratio(w, m, false)
		add(fmt.Sprintf("in-process, %s: wizard typed call ≥ 1.5x MicroWizard actE, like for like", callersOf(n)), x(got), got >= 1.5, ok1 && ok2 && m.PerSec > 0)
	}
	if len(r.Hops) > 0 {
		h, ok1 := r.hop("wizard-tcp")
		f, ok2 := r.hop(floorName)
		t, ok3 := r.hop(sleepName)
		got := float64(h.P50-t.P50) / float64(f.P50-t.P50)
		add("two hops: wizard TCP's p50 above the timer alone ≤ 1.3x the floor's",
			fmt.Sprintf("%s (%s / %s)", x(got), dur(h.P50-t.P50), dur(f.P50-t.P50)), got <= 1.3, ok1 && ok2 && ok3 && f.P50 > t.P50)
	}
	return ts
}

// callersOf says "1 caller", "16 callers", "1,024 callers".
func callersOf(n int) string {
	if n == 1 {
		return "1 caller"
	}
	return rate(float64(n)) + " callers"
}

func (r *Report) inProcess(name string, callers int) (Cell, bool) {
	for _, c := range r.InProcess {
		if c.Name == name && c.Callers == callers {
			return c, true
		}
	}
	return Cell{}, false
}

// rate formats requests per second with thousands separators.
func rate(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// dur formats a latency: µs below 1 ms, ms below 1 s.
func dur(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + dur(-d)
	case d < time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e3, 'f', 1, 64) + " µs"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + " ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s"
}

func ratioIf(ok bool, a, b float64) string {
	if !ok || b == 0 {
		return "—"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64) + "x"
}

func runs(n int) string {
	if n == 1 {
		return "1 run"
	}
	return strconv.Itoa(n) + " runs"
}

func everyRun(runs []Sample) string {
	parts := make([]string, len(runs))
	for i, s := range runs {
		parts[i] = rate(s.PerSec) + ", " + dur(s.P50) + ", " + dur(s.P99)
	}
	return strings.Join(parts, " · ")
}
