// Command compare measures wizard's remote calls against gRPC-go, net/http
// HTTP/1.1, MicroWizard 1.5.0 and Moleculer 0.15 (Node.js), drpc,
// connect-go, NATS micro and a raw multiplexed-TCP floor, each server in its
// own process, and writes a Markdown report into results.md (which holds
// the latest run of each mode: a run replaces its mode's section, earlier
// runs are in git history) and draws an SVG chart of it.
//
//	cd bench && go run ./cmd/compare
//	cd bench && go run ./cmd/compare -duration 500ms -runs 1 -concurrency 1,128
//
// Profile one contender (client and server CPU profiles in ./profiles):
//
//	go run ./cmd/compare -contenders wizard-tcp -concurrency 128 -hops=false -cluster=false -cpuprofile profiles
//
// The events mode (issue 31; see bench/README.md):
//
//	cd bench && go run ./cmd/compare -mode events
//
// The cluster scenario alone, wizard against gRPC-go:
//
//	go run ./cmd/compare -contenders wizard-tcp,grpc -concurrency '' -hops=false
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
	"github.com/wizardmesh/wizard/bench/internal/evbench"
	"github.com/wizardmesh/wizard/bench/internal/harness"
)

func main() {
	harness.ServeIfChild() // a server process: serves and exits
	evbench.ServeIfChild() // a process of the events mode: plays its part and exits

	var cfg harness.Config
	flag.DurationVar(&cfg.Duration, "duration", time.Second, "measured time of each run (each cell and each scenario)")
	flag.DurationVar(&cfg.Warmup, "warmup", 300*time.Millisecond, "unmeasured time before each run")
	flag.IntVar(&cfg.Runs, "runs", 3, "runs per cell; the report shows the median")
	conc := flag.String("concurrency", "1,16,128,1024", "comma-separated numbers of concurrent callers (empty: skip the comparison)")
	contenders := flag.String("contenders", "", "comma-separated contenders to run (default all: "+harness.Names()+")")
	flag.Int64Var(&cfg.MaxCalls, "max-calls", 50_000_000, "most calls in one run, whatever the time")
	flag.BoolVar(&cfg.Hops, "hops", true, "also run the seed article's two-hop scenario")
	flag.IntVar(&cfg.HopsCallers, "hops-callers", 50, "callers in the two-hop scenario")
	flag.DurationVar(&cfg.HopsDelay, "hops-delay", 10*time.Millisecond, "service B's delay in the two-hop scenario")
	flag.BoolVar(&cfg.Cluster, "cluster", true, "also run the seed article's cluster scenario (A balancing over replicas of B)")
	flag.IntVar(&cfg.ClusterCallers, "cluster-callers", 50, "callers in the cluster scenario")
	flag.IntVar(&cfg.ClusterReplicas, "cluster-replicas", 3, "replicas of service B in the cluster scenario")
	flag.DurationVar(&cfg.ClusterDelay, "cluster-delay", 10*time.Millisecond, "each replica's delay in the cluster scenario")
	inproc := flag.String("inproc", "1,16", "comma-separated numbers of concurrent callers of the in-process section (empty: skip it)")
	flag.StringVar(&cfg.CPUProfileDir, "cpuprofile", "", "write CPU profiles of the client and every server process into this directory")
	out := flag.String("out", "results", "directory for results.md and chart.svg")
	quiet := flag.Bool("q", false, "no progress lines on stderr")
	flag.Parse()

	var err error
	if cfg.Concurrency, err = benchkit.Ints("concurrency", *conc); err != nil {
		fail(err)
	}
	if cfg.InProcess, err = benchkit.Ints("inproc", *inproc); err != nil {
		fail(err)
	}
	if *contenders != "" {
		cfg.Contenders = strings.Split(*contenders, ",")
	}
	if !*quiet {
		cfg.Log = os.Stderr
	}
	cfg.Command = "go run ./cmd/compare"
	for _, a := range os.Args[1:] {
		if a == "" || strings.ContainsAny(a, " \t'\"") {
			a = strconv.Quote(a)
		}
		cfg.Command += " " + a
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if ran, err := runEvents(ctx, cfg, cfg.Contenders, *out); ran || err != nil {
		if err != nil {
			fail(err)
		}
		return
	}
	if ran, err := runStreams(ctx, cfg, *out); ran || err != nil {
		if err != nil {
			fail(err)
		}
		return
	}
	if ran, err := runScaling(ctx, cfg, *out); ran || err != nil {
		if err != nil {
			fail(err)
		}
		return
	}
	rep, err := harness.Run(ctx, cfg)
	if err != nil {
		fail(err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	if err := writeResults(filepath.Join(*out, "results.md"), rep.WriteMarkdown); err != nil {
		fail(err)
	}
	if len(cfg.Concurrency) > 0 {
		if err := benchkit.WriteFile(filepath.Join(*out, "chart.svg"), rep.WriteSVG); err != nil {
			fail(err)
		}
	}
	if err := rep.WriteMarkdown(os.Stdout); err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", *out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "compare:", err)
	os.Exit(1)
}
