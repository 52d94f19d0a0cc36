package gwbench

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// writeStreams writes the server stream section: one column per run.
func (r *Report) writeStreams(b *strings.Builder) {
	cfg := r.Config.Streams
	fmt.Fprintf(b, "## Server streams to %d WebSocket clients\n\n", cfg.Clients)
	fmt.Fprintf(b, "Each run: a fresh wizard-gateway process (the event push's, with a route `stream: server` to `%s`) with two static "+
		"peers, the echo node and a **streamer**: a wizard node over TCP in a process of its own serving the stream. %d WebSocket clients "+
		"connect (at most 64 at a time) and each opens one stream with a `req` frame (client i: `GET /stream/i`); once every stream is open "+
		"at the streamer, each sends for %v, then ends (the `end` frame, 200). At a rate, stream c sends its message i at "+
		"start + c/%d of an interval + i intervals (the streams' sends spread over the interval, not in step); rate 0 sends the next "+
		"message as soon as `Send` returns: as fast as the stream's flow control (the gateway receives a message once the one before "+
		"is written to the client's socket) allows.\n\n", streamPattern, cfg.Clients, cfg.Duration, cfg.Clients)
	b.WriteString("A **message** is one `msg` frame received by one client. Each message is `{\"seq\":S,\"t\":T}`, T the streamer's wall " +
		"clock in Unix nanoseconds read just before its `Send`; a client takes its wall clock as soon as its read of the frame returns " +
		"(the same machine's clock). The latency is therefore send to receipt by the client's goroutine, the load generator's scheduling " +
		"included. A `Send` that waits for the stream's window stamps the time it was called, after the message was due: its lag is the " +
		"row \"behind its schedule\", and a long `Send` p99 says flow control held the streamer back. A message is lost when a client " +
		"never received a seq that was sent on its stream (flow control should make it 0).\n\n")
	b.WriteString("| metric |")
	for _, x := range r.Streams {
		fmt.Fprintf(b, " %s |", x.Title())
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(r.Streams)) + "\n")
	row := func(name string, f func(StreamsResult) string) {
		fmt.Fprintf(b, "| %s |", name)
		for _, x := range r.Streams {
			fmt.Fprintf(b, " %s |", f(x))
		}
		b.WriteString("\n")
	}
	f1 := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	row("clients (streams)", func(x StreamsResult) string { return strconv.Itoa(x.Clients) })
	row("messages sent", func(x StreamsResult) string { return rate(float64(x.Sent)) })
	row("messages sent/s", func(x StreamsResult) string { return rate(x.SentPerSec()) })
	row("send errors", func(x StreamsResult) string { return strconv.FormatInt(x.Send.Errors, 10) })
	row("streamer behind its schedule, at most", func(x StreamsResult) string { return dur(x.Send.Behind) })
	row("`Send` p50 / p99", func(x StreamsResult) string { return dur(x.Send.SendP50) + " / " + dur(x.Send.SendP99) })
	row("messages received", func(x StreamsResult) string { return rate(float64(x.Received)) })
	row("**messages delivered/s** (start to last message)", func(x StreamsResult) string { return rate(x.DeliveredPerSec()) })
	row("**messages lost** (of them gaps below a later seq)", func(x StreamsResult) string {
		return strconv.FormatInt(x.Lost, 10) + " (" + strconv.FormatInt(x.Gaps, 10) + ")"
	})
	row("duplicate messages", func(x StreamsResult) string { return strconv.FormatInt(x.Duplicates, 10) })
	row("streams without a 200 end", func(x StreamsResult) string { return strconv.Itoa(x.BadEnds) })
	row("send → receipt p50", func(x StreamsResult) string { return dur(x.Latency.P50) })
	row("send → receipt p95", func(x StreamsResult) string { return dur(x.Latency.P95) })
	row("**send → receipt p99**", func(x StreamsResult) string { return dur(x.Latency.P99) })
	row("send → receipt max", func(x StreamsResult) string { return dur(x.Latency.Max) })
	row("gateway CPU avg / max, % of one core", func(x StreamsResult) string { return f1(x.Res.AvgCPU) + " / " + f1(x.Res.MaxCPU) })
	row("**gateway CPU time per message delivered**", func(x StreamsResult) string {
		if x.Received == 0 {
			return "—"
		}
		return dur(x.GatewayCPU / time.Duration(x.Received))
	})
	row("gateway RSS streams open / peak (VmHWM), MiB", func(x StreamsResult) string {
		return f1(mib(x.Res.StartRSS)) + " / " + f1(mib(x.Res.MaxRSS))
	})
	row("load generator's avg CPU, %", func(x StreamsResult) string { return f1(x.LoadCPU) })
	row("streamer's avg CPU, %", func(x StreamsResult) string { return f1(x.StreamerCPU) })
	row("connect + req, p50 / p99", func(x StreamsResult) string { return dur(x.Connect.P50) + " / " + dur(x.Connect.P99) })
	b.WriteString("\nCPU and RSS are the gateway process's from the moment every stream is open at the streamer to the last end frame; " +
		"the load generator and the streamer share the machine's cores with it.\n\n")
	for _, x := range r.Streams {
		if x.Send.Errors > 0 {
			fmt.Fprintf(b, "- **%s: %d send errors** (first: %s).\n", x.Title(), x.Send.Errors, x.Send.FirstErr)
		}
		if x.BadEnds > 0 {
			fmt.Fprintf(b, "- **%s: %d streams without a 200 end** (first: %s).\n", x.Title(), x.BadEnds, x.FirstBadEnd)
		}
	}
}

// writePaired writes, when a baseline binary ran beside this tree's, the
// ratios of each pair of event push and stream runs (this tree / the
// baseline, the pair run one after the other).
func (r *Report) writePaired(b *strings.Builder) {
	type pair struct {
		what             string
		cpu, p99, perSec [2]float64 // this tree's, the baseline's
	}
	var ps []pair
	for i := 0; i+1 < len(r.Events); i++ {
		x, y := r.Events[i], r.Events[i+1]
		if x.Pass != y.Pass || x.Rate != y.Rate || x.Gateway == y.Gateway {
			continue
		}
		if x.Gateway == WizardBaseline {
			x, y = y, x
		}
		per := func(e EventsResult) float64 { return float64(e.GatewayCPU) / float64(max(e.Received, 1)) }
		ps = append(ps, pair{"event push, " + strings.TrimSuffix(x.Title(), ", **baseline binary**"),
			[2]float64{per(x), per(y)}, [2]float64{float64(x.Latency.P99), float64(y.Latency.P99)}, [2]float64{x.DeliveredPerSec(), y.DeliveredPerSec()}})
		i++
	}
	for i := 0; i+1 < len(r.Streams); i++ {
		x, y := r.Streams[i], r.Streams[i+1]
		if x.Rate != y.Rate || x.Gateway == y.Gateway {
			continue
		}
		if x.Gateway == WizardBaseline {
			x, y = y, x
		}
		per := func(e StreamsResult) float64 { return float64(e.GatewayCPU) / float64(max(e.Received, 1)) }
		ps = append(ps, pair{"server streams, " + x.Title(),
			[2]float64{per(x), per(y)}, [2]float64{float64(x.Latency.P99), float64(y.Latency.P99)}, [2]float64{x.DeliveredPerSec(), y.DeliveredPerSec()}})
		i++
	}
	if len(ps) == 0 {
		return
	}
	b.WriteString("\n### This tree against the baseline binary, run by run\n\n")
	b.WriteString("Each pair ran one after the other (the baseline first in every other pair); ratios are this tree's / the baseline's.\n\n")
	b.WriteString("| run | gateway CPU per frame (this / baseline) | ratio | p99 (this / baseline) | ratio | delivered/s ratio |\n|---|---:|---:|---:|---:|---:|\n")
	ratio := func(v [2]float64) string {
		if v[1] == 0 {
			return "—"
		}
		return strconv.FormatFloat(v[0]/v[1], 'f', 2, 64) + "x"
	}
	for _, p := range ps {
		fmt.Fprintf(b, "| %s | %s / %s | %s | %s / %s | %s | %s |\n", p.what,
			dur(time.Duration(p.cpu[0])), dur(time.Duration(p.cpu[1])), ratio(p.cpu),
			dur(time.Duration(p.p99[0])), dur(time.Duration(p.p99[1])), ratio(p.p99), ratio(p.perSec))
	}
	b.WriteString("\n")
}

// Title labels a run of the stream scenario: its offered rate.
func (x StreamsResult) Title() string {
	t := rate(x.Rate) + " messages/s per stream"
	if x.Rate <= 0 {
		t = "as fast as flow control allows"
	}
	if x.Gateway == WizardBaseline {
		t += ", **baseline binary**"
	}
	return t
}
