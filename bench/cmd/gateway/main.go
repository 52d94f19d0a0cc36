// Command gateway measures wizard-gateway: pathfinder's scenario (1,000
// WebSocket or HTTP keep-alive clients ramped in 5 stages, with and
// without a JWT, the gateway's memory and CPU from /proc) and a side by
// side comparison with moleculer-web and grpc-gateway over HTTP, and
// event push (a mesh node's events to -clients WebSocket subscribers,
// broadcast and per user, emit to receipt) and server streams (a mesh
// node's stream to each of -clients WebSocket clients, send to receipt).
// It writes gateway.md and gateway.svg.
//
//	cd bench && go run ./cmd/gateway
//	cd bench && go run ./cmd/gateway -clients 100 -stage 1s -levels 1,16 -duration 500ms -runs 1
//	cd bench && go run ./cmd/gateway -clients 0 -levels "" -event-clients 1000 -stream-rates ""   # event push alone
//	cd bench && go run ./cmd/gateway -clients 0 -levels "" -events "" -stream-clients 1000        # server streams alone
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
	"github.com/wizardmesh/wizard/bench/internal/gwbench"
)

func main() {
	gwbench.ServeIfChild() // a server process: serves and exits

	var cfg gwbench.Config
	flag.IntVar(&cfg.Ramp.Clients, "clients", 1000, "clients of pathfinder's scenario at full load (0: skip it)")
	flag.IntVar(&cfg.Ramp.Stages, "stages", 5, "stages of the ramp, each adding clients/stages clients")
	flag.DurationVar(&cfg.Ramp.Stage, "stage", 10*time.Second, "duration of each stage")
	flag.IntVar(&cfg.Ramp.Rounds, "rounds", 2, "rounds of the ramp's passes, every other round in reverse order (no-token first in one, last in the next): the report pairs each round's JWT and no-token passes")
	scenarios := flag.String("scenarios", "", "comma-separated passes of the ramp (default all: ws,ws-hs256,ws-es256,http,http-hs256,http-es256)")
	levels := flag.String("levels", "1,128,1000", "comma-separated numbers of connections of the comparison (empty: skip it)")
	contenders := flag.String("contenders", "", "comma-separated contenders of the comparison (default all: "+strings.Join(gwbench.Contenders, ",")+")")
	flag.IntVar(&cfg.Runs, "runs", 3, "runs per cell of the comparison, the contenders' order reversed in every other run; the report shows the median and the paired ratios run by run")
	flag.DurationVar(&cfg.Warmup, "warmup", time.Second, "unmeasured time before each run of the comparison")
	flag.DurationVar(&cfg.Duration, "duration", 5*time.Second, "measured time of each run of the comparison")
	flag.StringVar(&cfg.ProfileDir, "profile", "", "profile wizard-gateway (package gateway in a process of this binary, not the wizard-gateway binary) into this directory: cpu.pprof per pass of the ramp and for the comparison (wizard-gateway-compare/), heap.pprof, goroutines.txt and memstats.txt halfway through the ramp's last stage; and grpc-gateway's cpu.pprof over the comparison (grpc-gateway/)")
	flag.StringVar(&cfg.HTTPClient, "http-client", gwbench.ClientRaw, "the load generator's HTTP client for every contender: raw (one connection written and read on the caller's goroutine) or net/http")
	eventClients := flag.Int("event-clients", 0, "WebSocket subscribers of the event push (0: -clients)")
	events := flag.String("events", "broadcast,per-user", "comma-separated passes of the event push to -clients WebSocket subscribers (empty: skip it): broadcast, per-user")
	eventRates := flag.String("event-rates", "10,50,0", "comma-separated events/s the emitter offers in the broadcast pass, a run each; every event goes to every client (0: as fast as acknowledged emits go)")
	userRates := flag.String("user-event-rates", "1000,0", "comma-separated events/s over all users the emitter offers in the per-user pass, a run each; each event goes to one client (0: as fast as acknowledged emits go)")
	flag.IntVar(&cfg.Events.Inflight, "event-inflight", 32, "the emitter's acknowledged emits in flight at most")
	flag.DurationVar(&cfg.Events.Duration, "event-duration", 10*time.Second, "how long the emitter emits in each event push pass")
	streamClients := flag.Int("stream-clients", 0, "WebSocket clients of the server streams, one stream each (0: -clients)")
	streamRates := flag.String("stream-rates", "10,50,0", "comma-separated messages/s per stream the streamer offers, a run each (empty: skip the server streams; 0: as fast as the stream's flow control allows)")
	flag.DurationVar(&cfg.Streams.Duration, "stream-duration", 10*time.Second, "how long the streamer sends in each run of the server streams")
	flag.StringVar(&cfg.BaselineGateway, "baseline-gateway", "", "a second wizard-gateway binary (e.g. built from main) that joins the comparison beside this tree's, run for run: a change's before and after")
	gwEnv := flag.String("gateway-env", "", "space-separated NAME=VALUE pairs added to wizard-gateway's environment (e.g. GOMEMLIMIT=48MiB)")
	out := flag.String("out", "results", "directory for gateway.md, gateway.svg (the comparison) and gateway-ramp.svg (the ramp)")
	quiet := flag.Bool("q", false, "no progress lines on stderr")
	flag.Parse()

	var err error
	if cfg.Levels, err = benchkit.Ints("levels", *levels); err != nil {
		fail(err)
	}
	if cfg.Events.Rates, err = gwbench.Rates("event-rates", *eventRates); err != nil {
		fail(err)
	}
	if cfg.Events.UserRates, err = gwbench.Rates("user-event-rates", *userRates); err != nil {
		fail(err)
	}
	if cfg.Streams.Rates, err = gwbench.Rates("stream-rates", *streamRates); err != nil {
		fail(err)
	}
	if *scenarios != "" {
		cfg.Scenarios = strings.Split(*scenarios, ",")
	}
	if *contenders != "" {
		cfg.Contenders = strings.Split(*contenders, ",")
	}
	if *events != "" {
		cfg.Events.Passes = strings.Split(*events, ",")
	}
	cfg.Events.Clients = cfg.Ramp.Clients
	if *eventClients > 0 {
		cfg.Events.Clients = *eventClients
	}
	cfg.Streams.Clients = cfg.Ramp.Clients
	if *streamClients > 0 {
		cfg.Streams.Clients = *streamClients
	}
	if len(cfg.Streams.Rates) == 0 {
		cfg.Streams.Clients = 0
	}
	cfg.GatewayEnv = strings.Fields(*gwEnv)
	if !*quiet {
		cfg.Log = os.Stderr
	}
	cfg.Command = "go run ./cmd/gateway"
	for _, a := range os.Args[1:] {
		if a == "" || strings.ContainsAny(a, " \t'\"") {
			a = strconv.Quote(a)
		}
		cfg.Command += " " + a
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := gwbench.Run(ctx, cfg)
	if err != nil {
		fail(err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	if err := benchkit.WriteFile(filepath.Join(*out, "gateway.md"), rep.WriteMarkdown); err != nil {
		fail(err)
	}
	if len(rep.Cells) > 0 {
		if err := benchkit.WriteFile(filepath.Join(*out, "gateway.svg"), rep.WriteSVG); err != nil {
			fail(err)
		}
	}
	if len(rep.Ramps) > 0 {
		if err := benchkit.WriteFile(filepath.Join(*out, "gateway-ramp.svg"), rep.WriteRampSVG); err != nil {
			fail(err)
		}
	}
	if err := rep.WriteMarkdown(os.Stdout); err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", *out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gateway:", err)
	os.Exit(1)
}
