package gwbench

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
)

// Report is what [Run] measured.
type Report struct {
	Env       Env
	Config    Config
	FDLimit   uint64 // the open-files limit of the load generator and its children
	Ramps     []RampResult
	Cells     []Cell // by level, then contender order
	Events    []EventsResult
	Streams   []StreamsResult
	Gaps      []Gap
	StartedAt time.Time
	Elapsed   time.Duration
	LoadEnd   string
}

// pathfinderColumn is one column of pathfinder's published table.
type pathfinderColumn struct {
	StartMB, MaxMB, AvgMB, MaxCPU, AvgCPU float64
	Total, OK, Errors                     int
	MinMs, MaxMs, MeanMs, SDMs            float64
	P50, P75, P95, P99                    float64 // ms
	PerSec                                float64
}

// pathfinder's figures, quoted from its README's Benchmarks section
// (openmatchmaking/pathfinder): MacBook Pro 13" mid 2012, 2.5 GHz Core
// i5, 2 cores / 4 threads, 16 GB; every service in Docker; Gatling, 1,000
// concurrent users in 5 stages; the JWT pass registers a user and gets its
// token from the Auth/Auth microservice, which also verifies it on every
// request.
var (
	pathfinderNoToken = pathfinderColumn{2.21, 69.54, 42.02, 114.04, 69.54, 6075, 6075, 0, 3, 13243, 2450, 3933, 17, 4824, 11358, 12968, 162.723}
	pathfinderJWT     = pathfinderColumn{2.23, 66.48, 48.54, 120.398, 45.66, 2241, 2241, 0, 15, 38945, 8948, 13833, 25, 20372, 37672, 38587, 53.357}
)

// WriteMarkdown writes the report: pathfinder's table beside ours, the
// stages at full load, the side by side comparison, the targets, notes.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	cfg := r.Config
	e := r.Env
	b.WriteString("# wizard-gateway: pathfinder's scenario, and beside moleculer-web and grpc-gateway\n\n")
	if cfg.Command != "" {
		fmt.Fprintf(&b, "Command: `%s`  \n", cfg.Command)
	}
	fmt.Fprintf(&b, "Machine: %s, %d CPUs, %s", cmp.Or(e.CPU, "unknown CPU"), e.NumCPU, e.GoVersion)
	if e.Node != "" {
		fmt.Fprintf(&b, ", Node.js %s", e.Node)
	}
	if e.Commit != "" {
		fmt.Fprintf(&b, ", wizard at %s", e.Commit)
	}
	if len(cfg.GatewayEnv) > 0 {
		fmt.Fprintf(&b, "; wizard-gateway's environment: %s", strings.Join(cfg.GatewayEnv, " "))
	}
	fmt.Fprintf(&b, "; open-files limit %d  \nStarted %s, took %v; load average %s at the start, %s at the end "+
		"(the machine is shared: other work skews every figure).\n\n",
		r.FDLimit, r.StartedAt.UTC().Format(time.RFC3339), r.Elapsed.Round(time.Second), cmp.Or(e.LoadStart, "?"), cmp.Or(r.LoadEnd, "?"))

	if len(r.Ramps) > 0 {
		r.writeRamp(&b)
	}
	if len(r.Cells) > 0 || len(r.Gaps) > 0 {
		r.writeCompare(&b)
	}
	if len(r.Events) > 0 {
		r.writeEvents(&b)
	}
	if len(r.Streams) > 0 {
		r.writeStreams(&b)
	}
	r.writePaired(&b)
	if t := r.targets(); len(t) > 0 {
		b.WriteString("## Targets of issue 14, against this run\n\n| target | measured | met |\n|---|---|---|\n")
		for _, t := range t {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", t.what, t.measured, t.met)
		}
		b.WriteString("\n")
	}
	r.writeNotes(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *Report) writeRamp(b *strings.Builder) {
	cfg := r.Config.Ramp
	fmt.Fprintf(b, "## pathfinder's scenario\n\n")
	fmt.Fprintf(b, "%d concurrent clients added in %d stages of %v (%d each), every client in a closed loop (one request in flight) "+
		"until the last stage ends; POST /echo {\"name\":\"ada\",\"n\":N} through wizard-gateway (its own process) to an echo service "+
		"on a wizard node over TCP (a third process), every answer checked. WebSocket: one connection per client, an `auth` frame "+
		"first when there is a token, then `req` frames. HTTP: one keep-alive connection per client, the token in every request's "+
		"Authorization header. A fresh gateway process per pass; its RSS (VmRSS, VmHWM of /proc/PID/status) and CPU "+
		"(utime + stime of /proc/PID/stat, %% of one core, sampled every 250 ms). Totals are over the whole pass, as pathfinder's are.%s\n\n",
		cfg.Clients, cfg.Stages, cfg.Stage, cfg.Clients/cfg.Stages, roundsNote(cfg.Rounds))
	b.WriteString("| metric | pathfinder, no token | pathfinder, JWT |")
	for _, x := range r.Ramps {
		fmt.Fprintf(b, " wizard, %s |", x.Label())
	}
	b.WriteString("\n|---|---:|---:|" + strings.Repeat("---:|", len(r.Ramps)) + "\n")
	row := func(name string, pf func(pathfinderColumn) string, ours func(RampResult) string) {
		fmt.Fprintf(b, "| %s | %s | %s |", name, pf(pathfinderNoToken), pf(pathfinderJWT))
		for _, x := range r.Ramps {
			fmt.Fprintf(b, " %s |", ours(x))
		}
		b.WriteString("\n")
	}
	f2 := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	ms := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) + " ms" }
	row("Startup RAM, MB (ours: MiB)", func(p pathfinderColumn) string { return f2(p.StartMB) }, func(x RampResult) string { return f2(mib(x.Res.StartRSS)) })
	row("Max RAM, MB (ours: MiB, VmHWM)", func(p pathfinderColumn) string { return f2(p.MaxMB) }, func(x RampResult) string { return f2(mib(x.Res.MaxRSS)) })
	row("Avg RAM, MB (ours: MiB)", func(p pathfinderColumn) string { return f2(p.AvgMB) }, func(x RampResult) string { return f2(mib(x.Res.AvgRSS)) })
	row("Max CPU, %", func(p pathfinderColumn) string { return f2(p.MaxCPU) }, func(x RampResult) string { return f2(x.Res.MaxCPU) })
	row("Avg CPU, %", func(p pathfinderColumn) string { return f2(p.AvgCPU) }, func(x RampResult) string { return f2(x.Res.AvgCPU) })
	row("Total requests", func(p pathfinderColumn) string { return rate(float64(p.Total)) }, func(x RampResult) string { return rate(float64(x.Overall.Calls + x.Overall.Errors)) })
	row("Successfully processed", func(p pathfinderColumn) string { return rate(float64(p.OK)) }, func(x RampResult) string { return rate(float64(x.Overall.Calls)) })
	row("Error responses", func(p pathfinderColumn) string { return strconv.Itoa(p.Errors) }, func(x RampResult) string { return strconv.Itoa(x.Overall.Errors) })
	row("Min response time", func(p pathfinderColumn) string { return ms(p.MinMs) }, func(x RampResult) string { return dur(x.Overall.Min) })
	row("Max response time", func(p pathfinderColumn) string { return ms(p.MaxMs) }, func(x RampResult) string { return dur(x.Overall.Max) })
	row("Mean response time", func(p pathfinderColumn) string { return ms(p.MeanMs) }, func(x RampResult) string { return dur(x.Overall.Mean) })
	row("Std dev response time", func(p pathfinderColumn) string { return ms(p.SDMs) }, func(x RampResult) string { return dur(x.Overall.SD) })
	row("50th percentile", func(p pathfinderColumn) string { return ms(p.P50) }, func(x RampResult) string { return dur(x.Overall.P50) })
	row("75th percentile", func(p pathfinderColumn) string { return ms(p.P75) }, func(x RampResult) string { return dur(x.Overall.P75) })
	row("95th percentile", func(p pathfinderColumn) string { return ms(p.P95) }, func(x RampResult) string { return dur(x.Overall.P95) })
	row("99th percentile", func(p pathfinderColumn) string { return ms(p.P99) }, func(x RampResult) string { return dur(x.Overall.P99) })
	row("Requests / sec", func(p pathfinderColumn) string { return strconv.FormatFloat(p.PerSec, 'f', 3, 64) }, func(x RampResult) string { return rate(x.Overall.PerSec) })
	row("(ours) load generator's avg CPU, %", func(pathfinderColumn) string { return "—" }, func(x RampResult) string { return f2(x.LoadCPU) })
	row("(ours) echo node's avg CPU, %", func(pathfinderColumn) string { return "—" }, func(x RampResult) string { return f2(x.EchoCPU) })
	b.WriteString("\npathfinder's columns are quoted from its README (Benchmarks): a MacBook Pro 13\" mid 2012, 2.5 GHz Core i5, 2 cores / 4 threads, " +
		"every service in Docker, Gatling with 1,000 concurrent users in 5 stages; its JWT pass also registers each user and gets the token " +
		"from its Auth/Auth microservice, which verifies the token on every request. Ours signs each client's token in the load generator " +
		"before it connects (not timed) and the gateway verifies it itself.\n\n")

	b.WriteString("![p99 per stage of each pass](gateway-ramp.svg)\n\n")
	fmt.Fprintf(b, "### Every stage\n\nThe calls that ended in each stage; RSS is the gateway's VmRSS at the stage's end, its clients' connections open.\n\n")
	b.WriteString("| pass | clients | req/s | p50 | p75 | p95 | p99 | RSS at the end |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range r.Ramps {
		for _, s := range x.Stages {
			fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s | %s | %s MiB |\n", x.Label(), s.Clients, rate(s.PerSec),
				dur(s.P50), dur(s.P75), dur(s.P95), dur(s.P99), strconv.FormatFloat(mib(s.RSS), 'f', 1, 64))
		}
	}
	b.WriteString("\n")
	for _, x := range r.Ramps {
		if x.Overall.Errors > 0 {
			fmt.Fprintf(b, "- **%s: %d errors** (first: %s).\n", x.Label(), x.Overall.Errors, x.Overall.FirstErr)
		}
	}
	b.WriteString("With no pause between a client's requests, Little's law ties latency to throughput: the mean latency at full load is " +
		"the clients divided by the req/s (")
	var little []string
	for _, x := range r.Ramps {
		l := x.lastStage()
		if l.PerSec > 0 {
			little = append(little, fmt.Sprintf("%s: %d / %s req/s = %s, measured mean %s", x.Label(), l.Clients, rate(l.PerSec),
				dur(time.Duration(float64(l.Clients)/l.PerSec*float64(time.Second))), dur(l.Mean)))
		}
	}
	b.WriteString(strings.Join(little, "; ") + "), so a p99 of 50 ms at 1,000 clients needs some 20,000 req/s or more through " +
		"a machine whose 2 cores also run the load generator, the echo node and other work.\n\n")
	r.writeRampRatios(b)
	b.WriteString("Connection set-up (dial, upgrade and auth frame), per pass: ")
	var parts []string
	for _, x := range r.Ramps {
		if x.Scenario.WebSocket {
			parts = append(parts, fmt.Sprintf("%s p50 %s, p99 %s", x.Label(), dur(x.Connect.P50), dur(x.Connect.P99)))
		}
	}
	b.WriteString(cmp.Or(strings.Join(parts, "; "), "—") + ".\n\n")
}

// writeRampRatios writes, round by round, each JWT pass's req/s over the
// no-token pass of the same transport in the same round, with the order
// the round ran its passes in.
func (r *Report) writeRampRatios(b *strings.Builder) {
	var rows []string
	for _, x := range r.Ramps {
		if x.Scenario.Alg == "" {
			continue
		}
		for _, base := range r.Ramps {
			if base.Round != x.Round || base.Scenario.Alg != "" || base.Scenario.WebSocket != x.Scenario.WebSocket || base.Overall.PerSec <= 0 {
				continue
			}
			round := "—"
			if x.Round > 0 {
				round = strconv.Itoa(x.Round)
			}
			rows = append(rows, fmt.Sprintf("| %s | %s over %s | %sx | %s after %s |\n", round, x.Scenario.Title(), base.Scenario.Title(),
				strconv.FormatFloat(x.Overall.PerSec/base.Overall.PerSec, 'f', 2, 64), ordinal(x.Seq), ordinal(base.Seq)))
		}
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("A token's cost, paired by round: each JWT pass's req/s over the whole pass against the no-token pass of the same transport " +
		"in the same round (every other round runs its passes in reverse order, so that drift in the machine's load does not favour one side " +
		"each time), and the places the two passes ran in.\n\n| round | passes | req/s ratio | ran |\n|---:|---|---:|---|\n")
	b.WriteString(strings.Join(rows, ""))
	b.WriteString("\n")
}

func roundsNote(rounds int) string {
	if rounds <= 1 {
		return " One round: the passes ran once, in the order of the table."
	}
	return fmt.Sprintf(" %d rounds of every pass, the order reversed in every other round (round 1 in the order of the table, round 2 the other way, …).", rounds)
}

// ordinal writes n as "1st", "2nd", "3rd", "4th", …
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}

func (r *Report) writeCompare(b *strings.Builder) {
	cfg := r.Config
	fmt.Fprintf(b, "## Side by side over HTTP: wizard-gateway, moleculer-web, grpc-gateway\n\n")
	fmt.Fprintf(b, "The same echo through each gateway, each in its own process in front of an echo service in another process; N "+
		"connections, each a keep-alive HTTP/1.1 connection with one request in flight; each cell the median of %s of %v after %v of warm-up "+
		"(req/s and each percentile taken separately), the contenders' runs interleaved, their order alternating (run 1 in table order, run 2 reversed, run 3 in table order, …). The last columns are the gateway process's VmRSS at the end of a run and its CPU over the run (%% of one core; Node.js runs JavaScript on one core), medians. `wizard TCP, direct` is no gateway: a wizard node "+
		"calling the same echo node over TCP, the baseline of the gateway's overhead.\n\n", runs(cfg.Runs), cfg.Duration, cfg.Warmup)
	if len(r.Cells) > 0 {
		b.WriteString("![req/s through each gateway](gateway.svg)\n\n")
	}
	b.WriteString("| connections | contender | req/s | p50 | p75 | p95 | p99 | errors | wizard-gateway's req/s over this | gateway RSS | gateway CPU |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range r.Cells {
		ratio := "—"
		if w, ok := r.cell(WizardGateway, c.Conns); ok && c.Contender != WizardGateway && c.PerSec > 0 {
			ratio = strconv.FormatFloat(w.PerSec/c.PerSec, 'f', 2, 64) + "x"
		}
		rss, cpu := "—", "—"
		if c.RSS > 0 {
			rss, cpu = strconv.FormatFloat(mib(c.RSS), 'f', 1, 64)+" MiB", strconv.FormatFloat(c.CPU, 'f', 0, 64)+"%"
		}
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %s | %d | %s | %s | %s |\n", c.Conns, titles[c.Contender], rate(c.PerSec), dur(c.P50), dur(c.P75), dur(c.P95), dur(c.P99), c.Errors, ratio, rss, cpu)
	}
	b.WriteString("\n")
	for _, g := range r.Gaps {
		fmt.Fprintf(b, "**Not measured: %s** — %s.\n\n", g.Contender, g.Reason)
	}
	for _, c := range r.Cells {
		if c.Errors > 0 {
			fmt.Fprintf(b, "- **%s, %d connections: %d errors** (first: %s).\n", titles[c.Contender], c.Conns, c.Errors, c.FirstErr)
		}
	}
	r.writePairedRatios(b)
	if cfg.Runs > 1 {
		b.WriteString("<details><summary>Every run (req/s, p50, p99)</summary>\n\n| connections | contender | runs |\n|---:|---|---|\n")
		for _, c := range r.Cells {
			parts := make([]string, len(c.Runs))
			for i, s := range c.Runs {
				parts[i] = rate(s.PerSec) + ", " + dur(s.P50) + ", " + dur(s.P99)
			}
			fmt.Fprintf(b, "| %d | %s | %s |\n", c.Conns, titles[c.Contender], strings.Join(parts, " · "))
		}
		b.WriteString("\n</details>\n\n")
	}
}

// pairedRatios returns wizard-gateway's req/s over other's, run by run
// (the runs of a level are paired: each run of every contender at a level
// falls in the same round of the interleaved order).
func (r *Report) pairedRatios(other string, conns int) []float64 {
	w, ok1 := r.cell(WizardGateway, conns)
	o, ok2 := r.cell(other, conns)
	if !ok1 || !ok2 || len(w.Runs) != len(o.Runs) {
		return nil
	}
	var xs []float64
	for i := range w.Runs {
		if o.Runs[i].PerSec > 0 {
			xs = append(xs, w.Runs[i].PerSec/o.Runs[i].PerSec)
		}
	}
	return xs
}

func ratios(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatFloat(x, 'f', 2, 64) + "x"
	}
	return strings.Join(parts, " · ")
}

// writePairedRatios writes wizard-gateway's req/s over each other
// contender's run by run: the ratio of two runs in the same round, which
// drift in the machine's load skews less than the ratio of two medians.
func (r *Report) writePairedRatios(b *strings.Builder) {
	var rows []string
	for _, c := range r.Cells {
		if c.Contender == WizardGateway {
			continue
		}
		xs := r.pairedRatios(c.Contender, c.Conns)
		if len(xs) == 0 {
			continue
		}
		rows = append(rows, fmt.Sprintf("| %d | %s | %s | %s |\n", c.Conns, titles[c.Contender], ratios(xs), strconv.FormatFloat(benchkit.Median(xs), 'f', 2, 64)+"x"))
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("Paired ratios: wizard-gateway's req/s over each contender's in the same run (round), run by run, and their median.\n\n" +
		"| connections | over | per run | median |\n|---:|---|---|---:|\n")
	b.WriteString(strings.Join(rows, ""))
	b.WriteString("\n")
	r.writeCPUPerCall(b)
}

// writeCPUPerCall writes each gateway's CPU time per answered call, run
// by run, and each run's ratio to wizard-gateway's: on a machine shared
// with other work the req/s of a run follows what the others leave, the
// CPU a call costs much less so.
func (r *Report) writeCPUPerCall(b *strings.Builder) {
	var rows []string
	for _, c := range r.Cells {
		if len(c.CPUs) == 0 {
			continue
		}
		w, _ := r.cell(WizardGateway, c.Conns)
		var per []string
		var xs []float64
		var ds []time.Duration
		for i := range c.Runs {
			d := c.cpuPerCall(i)
			if d == 0 {
				continue
			}
			ds = append(ds, d)
			per = append(per, dur(d))
			if wd := w.cpuPerCall(i); wd > 0 && c.Contender != WizardGateway {
				xs = append(xs, float64(d)/float64(wd))
			}
		}
		if len(ds) == 0 {
			continue
		}
		over, overMedian := "—", "—"
		if len(xs) > 0 {
			over, overMedian = ratios(xs), strconv.FormatFloat(benchkit.Median(xs), 'f', 2, 64)+"x"
		}
		rows = append(rows, fmt.Sprintf("| %d | %s | %s | %s | %s | %s |\n", c.Conns, titles[c.Contender], strings.Join(per, " · "), dur(benchkit.Median(ds)), over, overMedian))
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("The gateway process's CPU per answered call, run by run (its CPU over the run, warm-up included, divided by the run's req/s), " +
		"and each run's ratio to wizard-gateway's in the same run: the cost of a call, which other work on the machine skews far less than req/s.\n\n" +
		"| connections | gateway | CPU per call, per run | median | over wizard-gateway's, per run | median |\n|---:|---|---|---:|---|---:|\n")
	b.WriteString(strings.Join(rows, ""))
	b.WriteString("\n")
}

func (r *Report) writeNotes(b *strings.Builder) {
	b.WriteString("## Notes\n\n")
	b.WriteString("- **wizard-gateway**: the cmd/wizard-gateway binary built from this tree, route `POST /echo` -> `" + echoPattern + "`, " +
		"access log off, no rate limits, the echo node as a static peer (--peers) over wizard TCP; the echo handler answers `req.Msg()`. " +
		"JWT passes: `auth.jwt` with the key file (an HS256 secret, or an ES256 public key), issuer and audience checked, `exp` required.\n")
	b.WriteString("- **moleculer-web**: moleculer 0.15.2 and moleculer-web 0.11.0 (bench/moleculer, installed by `npm ci` from the committed " +
		"package-lock.json), alias `POST /echo` -> `echo.echo` with the JSON body parser; the echo action (`return ctx.params`) in a second " +
		"Node.js process, the brokers joined by Moleculer's TCP transporter with UDP discovery off and each other's address given as " +
		"127.0.0.1 (its listener binds every interface: the transporter has no option for its host). Both packages ask for Node.js >= 22; " +
		"they ran on the Node.js named above. Loggers, metrics and tracing off.\n")
	b.WriteString("- **grpc-gateway**: github.com/grpc-ecosystem/grpc-gateway/v2 v2.33.0's runtime.ServeMux with `POST /echo` registered " +
		"by HandlePath the way a generated RegisterXHandler does it (AnnotateContext, the marshaler's decoder, Invoke over one " +
		"grpc.ClientConn, ForwardResponseMessage), its default JSONPb (protojson) marshaler, in front of a grpc-go echo server in another " +
		"process; the messages are google.protobuf.Struct, the dynamic JSON object the others carry.\n")
	if r.Config.BaselineGateway != "" {
		b.WriteString("- **wizard-gateway (baseline binary)**: another cmd/wizard-gateway binary (`-baseline-gateway`, e.g. built from main), " +
			"set up as wizard-gateway is, run for run beside it: the change's before and after.\n")
	}
	b.WriteString("- RSS and CPU are the gateway process's alone (not the echo service's, nor moleculer's second process).\n")
	if r.Config.HTTPClient == ClientNetHTTP {
		b.WriteString("- The load generator's HTTP client: net/http's Client (`-http-client net/http`), one Transport and connection per client, for every contender.\n")
	} else {
		b.WriteString("- The load generator's HTTP client, for every contender alike: one keep-alive HTTP/1.1 connection per client written and read " +
			"on the caller's goroutine (`-http-client raw`, the default; a request in one write, the answer by Content-Length or chunked), " +
			"not net/http's Client, whose Transport hands each request to two goroutines of the connection: on 2 cores shared with the gateways " +
			"the generator's own CPU would cap every contender's req/s and add to every latency.\n")
	}
}

// cell returns the cell of contender name at conns.
func (r *Report) cell(name string, conns int) (Cell, bool) {
	for _, c := range r.Cells {
		if c.Contender == name && c.Conns == conns {
			return c, true
		}
	}
	return Cell{}, false
}

type target struct{ what, measured, met string }

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

// targets checks issue 14's targets against the report.
func (r *Report) targets() []target {
	var ts []target
	var ws []RampResult
	for _, x := range r.Ramps {
		if x.Scenario.WebSocket {
			ws = append(ws, x)
		}
	}
	full := r.Config.Ramp.Clients
	if len(ws) > 0 {
		var errs, p99s, rss []string
		errOK, p99OK, rssOK := true, true, true
		for _, x := range ws {
			t := x.Label()
			errs = append(errs, fmt.Sprintf("%s: %d", t, x.Overall.Errors))
			errOK = errOK && x.Overall.Errors == 0
			l := x.lastStage()
			p99s = append(p99s, fmt.Sprintf("%s: %s", t, dur(l.P99)))
			p99OK = p99OK && l.P99 <= 50*time.Millisecond && l.Calls > 0
			rss = append(rss, fmt.Sprintf("%s: %.1f MiB", t, mib(x.Res.MaxRSS)))
			rssOK = rssOK && x.Res.MaxRSS <= 64<<20
		}
		ts = append(ts,
			target{fmt.Sprintf("0 errors with %d WebSocket clients", full), strings.Join(errs, "; "), yes(errOK)},
			target{fmt.Sprintf("p99 ≤ 50 ms at %d WebSocket clients (the last stage)", full), strings.Join(p99s, "; "), yes(p99OK)},
			target{fmt.Sprintf("gateway RSS ≤ 64 MiB with %d WebSocket connections open (peak, VmHWM)", full), strings.Join(rss, "; "), yes(rssOK)},
		)
	}
	if w, ok := r.cell(WizardGateway, 128); ok {
		for _, other := range []string{MoleculerWeb, GRPCGateway} {
			t := target{what: "wizard-gateway ≥ 2x the req/s of " + other + " at 128 connections", measured: "not measured", met: "—"}
			if o, ok := r.cell(other, 128); ok && o.PerSec > 0 {
				x := w.PerSec / o.PerSec
				t.measured = fmt.Sprintf("%.2fx (%s against %s req/s)", x, rate(w.PerSec), rate(o.PerSec))
				if xs := r.pairedRatios(other, 128); len(xs) > 1 {
					t.measured += "; per run " + ratios(xs)
				}
				t.met = yes(x >= 2)
			}
			ts = append(ts, t)
		}
	}
	if w, ok := r.cell(WizardGateway, 1); ok {
		t := target{what: "the gateway adds ≤ 150 µs to the p50 of a direct wizard TCP call at 1 caller", measured: "not measured", met: "—"}
		if d, ok := r.cell(WizardDirect, 1); ok {
			add := w.P50 - d.P50
			t.measured = fmt.Sprintf("%s (p50 %s through the gateway, %s direct)", dur(add), dur(w.P50), dur(d.P50))
			t.met = yes(add <= 150*time.Microsecond)
		}
		ts = append(ts, t)
	}
	return ts
}
