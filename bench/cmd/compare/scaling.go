package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
	"github.com/wizardmesh/wizard/bench/internal/harness"
)

// The scaling modes: how cost grows with the payload and with the number
// of connections. Either flag runs its mode instead of the comparison, and
// writes its section into results.md in place of the mode's last one.
var (
	payloadSizes    = flag.String("payload", "", "payload mode: comma-separated payload sizes to echo (16, 1K, 64KiB, 1M); runs instead of the comparison")
	payloadCallers  = flag.Int("payload-callers", 16, "payload mode: concurrent callers (over one connection; pooled HTTP/1.1 gives each its own)")
	conns           = flag.Int("conns", 0, "connections mode: this many client connections to one server; runs instead of the comparison")
	connsContenders = flag.String("conns-contenders", "wizard-tcp,grpc,floor", "connections mode: comma-separated contenders (gRPC-go and the floor for reference)")
	connsSettle     = flag.Duration("conns-settle", time.Second, "connections mode: idle time before the server's idle RSS is read")
)

// runScaling runs the modes asked for, if any, writes their sections into
// out/results.md and writes out/payload.svg; it reports whether it ran.
func runScaling(ctx context.Context, cfg harness.Config, out string) (bool, error) {
	if *payloadSizes == "" && *conns == 0 {
		return false, nil
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return true, err
	}
	var sections []func(io.Writer) error
	if *payloadSizes != "" {
		var sizes []int
		for f := range strings.SplitSeq(*payloadSizes, ",") {
			n, err := harness.ParseSize(f)
			if err != nil {
				return true, fmt.Errorf("-payload: %w", err)
			}
			sizes = append(sizes, n)
		}
		if *payloadCallers <= 0 {
			return true, fmt.Errorf("-payload-callers: %d is not a positive number", *payloadCallers)
		}
		rep, err := harness.RunPayload(ctx, harness.PayloadConfig{
			Contenders: cfg.Contenders, Sizes: sizes, Callers: *payloadCallers,
			Runs: cfg.Runs, Warmup: cfg.Warmup, Duration: cfg.Duration, MaxCalls: cfg.MaxCalls,
			CPUProfileDir: cfg.CPUProfileDir, Log: cfg.Log, Command: cfg.Command,
		})
		if err != nil {
			return true, err
		}
		if err := benchkit.WriteFile(filepath.Join(out, "payload.svg"), rep.WriteSVG); err != nil {
			return true, err
		}
		sections = append(sections, rep.WriteMarkdown)
	}
	if *conns != 0 {
		rep, err := harness.RunConns(ctx, harness.ConnsConfig{
			Contenders: strings.Split(*connsContenders, ","), Conns: *conns, Settle: *connsSettle,
			Runs: cfg.Runs, Warmup: cfg.Warmup, Duration: cfg.Duration, MaxCalls: cfg.MaxCalls,
			CPUProfileDir: cfg.CPUProfileDir, Log: cfg.Log, Command: cfg.Command,
		})
		if err != nil {
			return true, err
		}
		sections = append(sections, rep.WriteMarkdown)
	}
	for _, sec := range sections {
		if err := sec(os.Stdout); err != nil {
			return true, err
		}
	}
	if err := writeResults(filepath.Join(out, "results.md"), sections...); err != nil {
		return true, err
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", filepath.Join(out, "results.md"))
	return true, nil
}
