package gwbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Config is what [Run] measures.
type Config struct {
	// Ramp is pathfinder's scenario; Scenarios names the passes to run
	// (the names of [Scenarios]; empty: all, nil Ramp.Clients: none).
	Ramp      RampConfig
	Scenarios []string
	// Levels are the side by side comparison's numbers of connections
	// (empty: no comparison); each cell is the median of Runs runs of
	// Warmup plus Duration.
	Levels           []int
	Runs             int
	Warmup, Duration time.Duration
	// Contenders names the comparison's contenders (empty: all).
	Contenders []string
	// BenchDir is the bench module's root (moleculer/ is in it); empty:
	// found from the working directory.
	BenchDir string
	// Log receives progress lines (nil: none); Stderr the processes'
	// standard error (nil: os.Stderr).
	Log, Stderr io.Writer
	// Command is the command line printed in the report.
	Command string
	// ProfileDir, when set, runs the ramp against package gateway in a
	// process of this binary instead of the wizard-gateway binary, and
	// writes its CPU profile over each pass and its heap profile,
	// goroutines and memory statistics halfway through the last stage
	// into ProfileDir/<pass>.
	ProfileDir string
	// GatewayEnv is added to wizard-gateway's environment (GOGC=50,
	// GOMEMLIMIT=48MiB: the runtime's knobs, to see what they do to RSS).
	GatewayEnv []string
	// HTTPClient is the load generator's HTTP client for every contender:
	// ClientRaw (empty: the default) or ClientNetHTTP.
	HTTPClient string
	// Events is the event push scenario (no Passes: none).
	Events EventsConfig
	// Streams is the server stream scenario (no Rates: none).
	Streams StreamsConfig
	// BaselineGateway, when set, is a second wizard-gateway binary (one
	// built from main, say) that joins the comparison as WizardBaseline:
	// a change's before and after, run for run beside each other. The
	// event push and stream runs then run twice, with either binary, in
	// alternating order.
	BaselineGateway string
}

// Contenders lists the comparison's contenders in table order
// (WizardBaseline joins them, after WizardGateway, when
// Config.BaselineGateway is set).
var Contenders = []string{WizardGateway, MoleculerWeb, GRPCGateway, WizardDirect}

// Run builds wizard-gateway, starts the echo node, runs the ramp's passes
// (each with a fresh gateway process) and the comparison, and returns the
// report. A contender that cannot run is a [Gap] of the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Runs <= 0 {
		cfg.Runs = 1
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", args...)
		}
	}
	rep := &Report{Env: environment(), Config: cfg, StartedAt: time.Now()}
	rep.FDLimit = raiseFDLimit()
	dir, err := os.MkdirTemp("", "gwbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bd := cfg.BenchDir
	if bd == "" {
		if bd, err = findBenchDir(); err != nil {
			return nil, err
		}
	}
	switch cfg.HTTPClient {
	case "":
		cfg.HTTPClient = ClientRaw
	case ClientRaw, ClientNetHTTP:
	default:
		return nil, fmt.Errorf("gwbench: HTTP client %q: want %s or %s", cfg.HTTPClient, ClientRaw, ClientNetHTTP)
	}
	rep.Config.HTTPClient = cfg.HTTPClient
	if cfg.BaselineGateway != "" {
		if cfg.BaselineGateway, err = filepath.Abs(cfg.BaselineGateway); err != nil {
			return nil, err
		}
		if _, err := os.Stat(cfg.BaselineGateway); err != nil {
			return nil, fmt.Errorf("gwbench: baseline gateway: %w", err)
		}
	}
	e := &env{dir: dir, benchDir: bd, baseBin: cfg.BaselineGateway, stderr: cfg.Stderr, logf: logf, profDir: cfg.ProfileDir, gwEnv: cfg.GatewayEnv, httpClient: cfg.HTTPClient}
	defer e.stopAll()
	logf("building cmd/wizard-gateway")
	if err := e.buildGateway(ctx); err != nil {
		return nil, err
	}
	if e.echo, err = e.child(ctx, childSpec{Role: roleEcho, Listen: "127.0.0.1:0"}); err != nil {
		return nil, err
	}
	logf("echo node pid %d on %s", e.echo.pid(), e.echo.addr)

	if cfg.Ramp.Clients > 0 {
		var scs []Scenario
		for _, sc := range Scenarios {
			if len(cfg.Scenarios) == 0 || slices.Contains(cfg.Scenarios, sc.Name) {
				scs = append(scs, sc)
			}
		}
		rounds := max(cfg.Ramp.Rounds, 1)
		for round := range rounds {
			// Every other round runs the passes in reverse: no-token
			// first, then HS256, then ES256 in one round, the other way in
			// the next, so that drift does not bias a round's ratios the
			// same way every time.
			order := slices.Clone(scs)
			if round%2 == 1 {
				slices.Reverse(order)
			}
			for _, sc := range order {
				label := sc.Name // names its config and profile directory
				if round > 0 {
					label += "-round" + strconv.Itoa(round+1)
				}
				r, err := e.rampPass(ctx, cfg.Ramp, sc, label, logf)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", sc.Title(), err)
				}
				if rounds > 1 {
					r.Round = round + 1
				}
				r.Seq = len(rep.Ramps) + 1
				rep.Ramps = append(rep.Ramps, r)
			}
		}
		// The tables show each round's passes in Scenarios' order; Seq
		// keeps the order they ran in.
		slices.SortStableFunc(rep.Ramps, func(a, b RampResult) int {
			if a.Round != b.Round {
				return a.Round - b.Round
			}
			return slices.Index(Scenarios, a.Scenario) - slices.Index(Scenarios, b.Scenario)
		})
	}
	if err := e.eventPasses(ctx, cfg, rep, logf); err != nil {
		return nil, err
	}
	if err := e.streamRuns(ctx, cfg, rep, logf); err != nil {
		return nil, err
	}
	if len(cfg.Levels) > 0 {
		if err := e.compare(ctx, cfg, rep, logf); err != nil {
			return nil, err
		}
	}
	rep.Elapsed = time.Since(rep.StartedAt)
	rep.LoadEnd = loadAverage()
	return rep, nil
}

// rampPass starts a gateway for sc, runs the ramp, stops the gateway.
func (e *env) rampPass(ctx context.Context, cfg RampConfig, sc Scenario, label string, logf func(string, ...any)) (RampResult, error) {
	var sign *signer
	if sc.Alg != "" {
		var err error
		if sign, err = newSigner(sc.Alg, e.dir); err != nil {
			return RampResult{}, err
		}
	}
	g, err := e.startWizardGateway(ctx, sign, label)
	if err != nil {
		return RampResult{}, err
	}
	defer e.stopGateway(g)
	logf("%-28s wizard-gateway pid %d on %s", sc.Title(), g.main.pid(), g.base)
	if sign != nil {
		// The pass measures the verification only if a request without
		// the token is refused.
		c := g.httpCaller("")
		err := c.call(ctx, 1)
		c.close()
		if err == nil || !strings.HasPrefix(err.Error(), "401 ") {
			return RampResult{}, fmt.Errorf("wizard-gateway with auth.jwt answered a request without a token: %v (want 401)", err)
		}
	}
	var atFull func()
	if e.profDir != "" {
		atFull = func() {
			if err := g.main.query(ctx, queryHeap); err != nil {
				logf("%v", err)
			}
		}
	}
	r, err := runRamp(ctx, cfg, sc, g, e.echo, sign, atFull, logf)
	if err != nil {
		return r, err
	}
	o := r.Overall
	logf("%-28s %8.0f req/s  p50 %v  p99 %v  errors %d  RSS %.1f -> %.1f MiB  CPU avg %.0f%% max %.0f%%",
		sc.Title(), o.PerSec, o.P50, o.P99, o.Errors, mib(r.Res.StartRSS), mib(r.Res.MaxRSS), r.Res.AvgCPU, r.Res.MaxCPU)
	return r, nil
}

// raiseFDLimit raises the soft limit of open files to the hard limit (the
// children inherit it) and returns the limit in force.
func raiseFDLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
		}
	}
	return l.Cur
}

// findBenchDir walks up from the working directory to the directory that
// holds moleculer/server.js and a go.mod.
func findBenchDir() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "moleculer", "server.js")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				return d, nil
			}
		}
		p := filepath.Dir(d)
		if p == d {
			return "", errors.New("gwbench: no bench module (a directory with go.mod and moleculer/server.js) above the working directory")
		}
		d = p
	}
}
