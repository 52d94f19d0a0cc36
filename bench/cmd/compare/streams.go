package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
	"github.com/wizardmesh/wizard/bench/internal/harness"
)

// The streams mode: server-streaming messages over one connection, and
// what an idle stream costs each side. -streams runs it instead of the
// comparison, and writes its section into results.md in place of the
// mode's last one and its chart into streams.svg.
var (
	streamCounts = flag.String("streams", "", "streams mode: comma-separated numbers of concurrent streams over one connection (1,64); runs instead of the comparison")
	streamSizes  = flag.String("stream-sizes", "16,64K", "streams mode: comma-separated message sizes (16 to 1M)")
	streamIdle   = flag.Int("stream-idle", 1000, "streams mode: idle streams whose cost per stream is measured on each side (0: skip)")
)

// runStreams runs the streams mode if asked for; it reports whether it
// ran.
func runStreams(ctx context.Context, cfg harness.Config, out string) (bool, error) {
	if *streamCounts == "" {
		return false, nil
	}
	counts, err := benchkit.Ints("streams", *streamCounts)
	if err != nil {
		return true, err
	}
	var sizes []int
	for f := range strings.SplitSeq(*streamSizes, ",") {
		n, err := harness.ParseSize(f)
		if err != nil {
			return true, fmt.Errorf("-stream-sizes: %w", err)
		}
		sizes = append(sizes, n)
	}
	rep, err := harness.RunStreams(ctx, harness.StreamsConfig{
		Contenders: cfg.Contenders, Streams: counts, Sizes: sizes, Idle: *streamIdle,
		Runs: cfg.Runs, Warmup: cfg.Warmup, Duration: cfg.Duration,
		CPUProfileDir: cfg.CPUProfileDir, Log: cfg.Log, Command: cfg.Command,
	})
	if err != nil {
		return true, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return true, err
	}
	if err := benchkit.WriteFile(filepath.Join(out, "streams.svg"), rep.WriteSVG); err != nil {
		return true, err
	}
	if err := rep.WriteMarkdown(os.Stdout); err != nil {
		return true, err
	}
	if err := writeResults(filepath.Join(out, "results.md"), rep.WriteMarkdown); err != nil {
		return true, err
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", filepath.Join(out, "results.md"))
	return true, nil
}
