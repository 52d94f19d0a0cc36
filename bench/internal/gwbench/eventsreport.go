package gwbench

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// writeEvents writes the event push section: one column per pass.
func (r *Report) writeEvents(b *strings.Builder) {
	cfg := r.Config.Events
	fmt.Fprintf(b, "## Event push to %d WebSocket clients\n\n", cfg.Clients)
	fmt.Fprintf(b, "Each pass: a fresh wizard-gateway process (routes with `events`, `websocket.event_queue: %d`, `event_overflow: drop_oldest`) "+
		"with two static peers, the echo node and an **emitter**: a wizard node over TCP in a process of its own that emits `Node.Emit` "+
		"events, each acknowledged by the gateway's node, at the offered rate for %v (at most %d emits in flight; rate 0: as fast as "+
		"acknowledged emits go). %d WebSocket clients connect (at most 64 at a time) and each sends one `sub` frame before the first emit. "+
		"**broadcast**: every client subscribes to the route `ticks`, whose entry `%s` has no template: one mesh subscription, "+
		"each event fanned out to every client. **per user**: every client authenticates with its own HS256 JWT (subject user-<i>) and "+
		"subscribes to the route `mine`, `%s,user:{auth.subject}`: one mesh subscription per client, each event emitted to one user.\n\n",
		eventQueue, cfg.Duration, cmpOr(cfg.Inflight, 32), cfg.Clients, eventBroadcast, eventPerUser)
	b.WriteString("A **frame** (a \"message\") is one `event` frame received by one client: a broadcast event is as many frames as clients. " +
		"Each event's message is `{\"seq\":S,\"t\":T}`, T the emitter's wall clock in Unix nanoseconds read just before its `Emit`; " +
		"a client takes its wall clock as soon as its read of the frame returns (the same machine's clock: no skew, but a clock step " +
		"during the run would show). The latency is therefore emit to receipt by the client's goroutine, the load generator's " +
		"scheduling included, as a browser's would be. An emitter that falls behind its schedule (acknowledged emits in flight all " +
		"waiting) stamps the time it emits, not the time the event was due: its lag is the row \"behind its schedule\", not in the " +
		"latencies, and the events emitted/s below the offered rate say the gateway could not take more. A frame is lost when a client never received its seq (the clients wait until " +
		"every expected frame came, or none came for 5 s); under `drop_oldest` a full queue drops its oldest event, which shows as a " +
		"gap below a later seq. Emits are acknowledged: an emit without error reached the gateway's node, so a frame lost after it was " +
		"dropped in the gateway (its `Gateway.EventStats().Dropped`, which the binary does not publish) or on the way to the client.\n\n")
	b.WriteString("| metric |")
	for _, x := range r.Events {
		fmt.Fprintf(b, " %s |", x.Title())
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(r.Events)) + "\n")
	row := func(name string, f func(EventsResult) string) {
		fmt.Fprintf(b, "| %s |", name)
		for _, x := range r.Events {
			fmt.Fprintf(b, " %s |", f(x))
		}
		b.WriteString("\n")
	}
	f1 := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	row("clients (subscriptions)", func(x EventsResult) string { return strconv.Itoa(x.Clients) })
	row("events emitted", func(x EventsResult) string { return rate(float64(x.Emit.Emitted)) })
	row("**events emitted/s**", func(x EventsResult) string { return rate(x.EmittedPerSec()) })
	row("emit errors", func(x EventsResult) string { return strconv.FormatInt(x.Emit.Errors, 10) })
	row("emitter behind its schedule, at most", func(x EventsResult) string { return dur(x.Emit.Behind) })
	row("acknowledged emit, p50 / p99", func(x EventsResult) string { return dur(x.Emit.EmitP50) + " / " + dur(x.Emit.EmitP99) })
	row("frames expected (events × their subscribers)", func(x EventsResult) string { return rate(float64(x.Expected)) })
	row("frames received", func(x EventsResult) string { return rate(float64(x.Received)) })
	row("**frames delivered/s** (first emit to last frame)", func(x EventsResult) string { return rate(x.DeliveredPerSec()) })
	row("**frames lost** (of them gaps below a later seq)", func(x EventsResult) string {
		return strconv.FormatInt(x.Lost, 10) + " (" + strconv.FormatInt(x.Gaps, 10) + ")"
	})
	row("clients that lost any; the most one lost", func(x EventsResult) string {
		return strconv.Itoa(x.LossyClients) + "; " + strconv.FormatInt(x.MaxLost, 10)
	})
	row("duplicate frames", func(x EventsResult) string { return strconv.FormatInt(x.Duplicates, 10) })
	row("emit → receipt p50", func(x EventsResult) string { return dur(x.Latency.P50) })
	row("emit → receipt p95", func(x EventsResult) string { return dur(x.Latency.P95) })
	row("**emit → receipt p99**", func(x EventsResult) string { return dur(x.Latency.P99) })
	row("emit → receipt max", func(x EventsResult) string { return dur(x.Latency.Max) })
	row("gateway CPU avg / max, % of one core", func(x EventsResult) string { return f1(x.Res.AvgCPU) + " / " + f1(x.Res.MaxCPU) })
	row("gateway CPU time per frame delivered", func(x EventsResult) string {
		if x.Received == 0 {
			return "—"
		}
		return dur(x.GatewayCPU / time.Duration(x.Received))
	})
	row("gateway RSS subscribed / peak (VmHWM), MiB", func(x EventsResult) string {
		return f1(mib(x.Res.StartRSS)) + " / " + f1(mib(x.Res.MaxRSS))
	})
	row("load generator's avg CPU, %", func(x EventsResult) string { return f1(x.LoadCPU) })
	row("emitter's avg CPU, %", func(x EventsResult) string { return f1(x.EmitterCPU) })
	row("connect + auth + sub, p50 / p99", func(x EventsResult) string { return dur(x.Connect.P50) + " / " + dur(x.Connect.P99) })
	b.WriteString("\nCPU and RSS are the gateway process's from the moment every client is subscribed to the end of the drain; the " +
		"load generator (the clients' reads) and the emitter share the machine's cores with it.\n\n")
	for _, x := range r.Events {
		if x.Emit.Errors > 0 {
			fmt.Fprintf(b, "- **%s: %d emit errors** (first: %s).\n", x.Title(), x.Emit.Errors, x.Emit.FirstErr)
		}
	}
}

// Title labels a run of the event push: its pass and offered rate.
func (x EventsResult) Title() string {
	t := x.Pass.Title() + ", " + rate(x.Rate) + " events/s offered"
	if x.Rate <= 0 {
		t = x.Pass.Title() + ", as fast as acknowledged emits go"
	}
	if x.Gateway == WizardBaseline {
		t += ", **baseline binary**"
	}
	return t
}
