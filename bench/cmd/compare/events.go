package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
	"github.com/wizardmesh/wizard/bench/internal/evbench"
	"github.com/wizardmesh/wizard/bench/internal/harness"
)

// The events mode (issue 31): events per second and delivery latency,
// an emitter process to groups of subscriber processes. -mode events runs
// it instead of the comparison; it writes events.md and events.svg (the
// latest run; earlier ones are in git history).
var (
	mode          = flag.String("mode", "", "events: the events mode (emit to groups; see -event-*) instead of the comparison")
	eventGroups   = flag.String("event-groups", "1,10", "events mode: comma-separated numbers of groups each event goes to")
	eventMembers  = flag.String("event-members", "1", "events mode: comma-separated numbers of members (processes) per group")
	eventEmitters = flag.String("event-emitters", "1,64", "events mode: comma-separated numbers of concurrent emitting loops")
)

// runEvents runs the events mode if asked for; it reports whether it ran.
func runEvents(ctx context.Context, cfg harness.Config, contenders []string, out string) (bool, error) {
	switch *mode {
	case "":
		return false, nil
	case "events":
	default:
		return true, fmt.Errorf("-mode %q: the modes are events (the others have flags of their own: -streams, -payload, -conns)", *mode)
	}
	ec := evbench.Config{Contenders: contenders, Runs: cfg.Runs, Warmup: cfg.Warmup, Duration: cfg.Duration,
		ProfileDir: cfg.CPUProfileDir, Log: cfg.Log, Command: cfg.Command}
	var err error
	if ec.Groups, err = benchkit.Ints("event-groups", *eventGroups); err != nil {
		return true, err
	}
	if ec.Members, err = benchkit.Ints("event-members", *eventMembers); err != nil {
		return true, err
	}
	if ec.Emitters, err = benchkit.Ints("event-emitters", *eventEmitters); err != nil {
		return true, err
	}
	rep, err := evbench.Run(ctx, ec)
	if err != nil {
		return true, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return true, err
	}
	if err := benchkit.WriteFile(filepath.Join(out, "events.svg"), rep.WriteSVG); err != nil {
		return true, err
	}
	if err := benchkit.WriteFile(filepath.Join(out, "events.md"), rep.WriteMarkdown); err != nil {
		return true, err
	}
	if err := rep.WriteMarkdown(os.Stdout); err != nil {
		return true, err
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", filepath.Join(out, "events.md"))
	return true, nil
}
