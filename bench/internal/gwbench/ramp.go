package gwbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// RampConfig is pathfinder's scenario: Clients clients added in Stages
// equal stages of Stage each, every client in a closed loop (one request
// in flight) until the last stage ends.
type RampConfig struct {
	Clients int
	Stages  int
	Stage   time.Duration
	// Rounds runs the passes this many times (0: once), the order of the
	// passes reversed in every other round so that a drift of the
	// machine's load does not always favour the same pass: the ratios
	// of one round's passes are paired.
	Rounds int
}

// Scenario is one pass of the ramp.
type Scenario struct {
	Name      string // "ws", "ws-hs256", …
	WebSocket bool   // WebSocket frames; false: HTTP/1.1 keep-alive, one connection per client
	Alg       string // the JWT's algorithm, "" for none
}

// Title labels the scenario in tables.
func (s Scenario) Title() string {
	t := "HTTP keep-alive"
	if s.WebSocket {
		t = "WebSocket"
	}
	if s.Alg == "" {
		return t + ", no token"
	}
	return t + ", JWT " + s.Alg
}

// Scenarios are the ramp's passes, in run order.
var Scenarios = []Scenario{
	{Name: "ws", WebSocket: true},
	{Name: "ws-hs256", WebSocket: true, Alg: "HS256"},
	{Name: "ws-es256", WebSocket: true, Alg: "ES256"},
	{Name: "http", WebSocket: false},
	{Name: "http-hs256", WebSocket: false, Alg: "HS256"},
	{Name: "http-es256", WebSocket: false, Alg: "ES256"},
}

// StageStats is one stage of a ramp: the calls that ended in it.
type StageStats struct {
	Clients int // open at the stage's end
	Stats
	RSS int64 // the gateway's VmRSS at the stage's end
}

// RampResult is what one pass measured.
type RampResult struct {
	Scenario Scenario
	Overall  Stats // every call of the pass, over its whole time (pathfinder's totals)
	Stages   []StageStats
	Res      Resources // the gateway process's
	Connect  Stats     // the clients' connection (and auth frame) times
	// Round is the pass's round (from 1) when RampConfig.Rounds > 1, else
	// 0; Seq its place in the run order (from 1).
	Round, Seq int
	// LoadCPU and EchoCPU are the average CPU (% of one core) of the load
	// generator (this process) and of the echo node over the pass: what
	// the gateway shared the machine with.
	LoadCPU, EchoCPU float64
}

// Label names the pass in tables: its scenario's title, and its round
// when there are several.
func (r RampResult) Label() string {
	if r.Round == 0 {
		return r.Scenario.Title()
	}
	return r.Scenario.Title() + ", round " + strconv.Itoa(r.Round)
}

// lastStage returns the stage with every client open.
func (r RampResult) lastStage() StageStats {
	if len(r.Stages) == 0 {
		return StageStats{}
	}
	return r.Stages[len(r.Stages)-1]
}

type timed struct {
	end time.Time
	lat time.Duration
}

// runRamp drives g with the ramp of sc.
// atFull, when not nil, runs halfway through the last stage, every
// client connected.
func runRamp(ctx context.Context, cfg RampConfig, sc Scenario, g *gateway, echo *proc, sign *signer, atFull func(), logf func(string, ...any)) (RampResult, error) {
	res := RampResult{Scenario: sc}
	if cfg.Stages <= 0 || cfg.Clients < cfg.Stages || cfg.Stage <= 0 {
		return res, fmt.Errorf("gwbench: ramp of %d clients in %d stages of %v", cfg.Clients, cfg.Stages, cfg.Stage)
	}
	tokens := make([]string, cfg.Clients)
	if sign != nil {
		for i := range tokens {
			t, err := sign.token("user-"+strconv.Itoa(i), time.Hour)
			if err != nil {
				return res, err
			}
			tokens[i] = t
		}
	}
	mon, err := startMonitor([]int{g.main.pid()}, 250*time.Millisecond)
	if err != nil {
		return res, err
	}
	self, err1 := startMonitor([]int{os.Getpid()}, time.Second)
	other, err2 := startMonitor([]int{echo.pid()}, time.Second)
	if err := errors.Join(err1, err2); err != nil {
		mon.finish()
		return res, err
	}
	start := time.Now()
	end := start.Add(time.Duration(cfg.Stages) * cfg.Stage)
	cctx, cancel := context.WithDeadline(ctx, end.Add(30*time.Second))
	defer cancel()

	var (
		errs     errCount
		wg       sync.WaitGroup
		mu       sync.Mutex
		connects []time.Duration
		samples  = make([][]timed, cfg.Clients)
	)
	dial := func(i int) (caller, error) {
		if sc.WebSocket {
			return dialWS(cctx, g.wsURL(), tokens[i])
		}
		return g.httpCaller(tokens[i]), nil
	}
	client := func(i int) {
		mine := make([]timed, 0, 256)
		defer func() { samples[i] = mine }()
		var c caller
		defer func() {
			if c != nil {
				c.close()
			}
		}()
		for n := int64(0); time.Now().Before(end) && cctx.Err() == nil; n++ {
			if c == nil {
				t0 := time.Now()
				var err error
				if c, err = dial(i); err != nil {
					errs.add(fmt.Errorf("client %d: connect: %w", i, err))
					t := time.NewTimer(100 * time.Millisecond) // not a test: a pause before the retry
					select {
					case <-t.C:
					case <-cctx.Done():
					}
					continue
				}
				mu.Lock()
				connects = append(connects, time.Since(t0))
				mu.Unlock()
			}
			s := time.Now()
			err := c.call(cctx, int64(i)<<32|n)
			e := time.Now()
			if err != nil {
				errs.add(fmt.Errorf("client %d: %w", i, err))
				if sc.WebSocket {
					c.close()
					c = nil
				}
				continue
			}
			mine = append(mine, timed{e, e.Sub(s)})
		}
	}
	per := cfg.Clients / cfg.Stages
	stageEnds := make([]time.Time, cfg.Stages)
	rss := make([]int64, cfg.Stages)
	for st := range cfg.Stages {
		from := st * per
		to := from + per
		if st == cfg.Stages-1 {
			to = cfg.Clients
		}
		for i := from; i < to; i++ {
			wg.Go(func() { client(i) })
		}
		stageEnds[st] = start.Add(time.Duration(st+1) * cfg.Stage)
		if st == cfg.Stages-1 && atFull != nil {
			t := time.NewTimer(time.Until(stageEnds[st].Add(-cfg.Stage / 2)))
			select {
			case <-t.C:
				atFull()
			case <-ctx.Done():
				t.Stop()
			}
		}
		t := time.NewTimer(time.Until(stageEnds[st]))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		rss[st] = mon.rssNow()
		if logf != nil {
			logf("%-28s stage %d/%d: %d clients, gateway RSS %.1f MiB, %d errors so far", sc.Title(), st+1, cfg.Stages, to, mib(rss[st]), errs.n.Load())
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	if res.Res, err = mon.finish(); err != nil {
		return res, err
	}
	sr, _ := self.finish()
	or, _ := other.finish()
	res.LoadCPU, res.EchoCPU = sr.AvgCPU, or.AvgCPU
	var all []time.Duration
	byStage := make([][]time.Duration, cfg.Stages)
	for _, m := range samples {
		for _, s := range m {
			all = append(all, s.lat)
			k := cfg.Stages - 1
			for j, e := range stageEnds {
				if s.end.Before(e) {
					k = j
					break
				}
			}
			byStage[k] = append(byStage[k], s.lat)
		}
	}
	ne, fe := int(errs.n.Load()), errs.firstErr()
	res.Overall = summarise(all, ne, fe, elapsed)
	for st := range cfg.Stages {
		n := (st + 1) * per
		if st == cfg.Stages-1 {
			n = cfg.Clients
		}
		res.Stages = append(res.Stages, StageStats{Clients: n, Stats: summarise(byStage[st], 0, "", cfg.Stage), RSS: rss[st]})
	}
	res.Connect = summarise(connects, 0, "", elapsed)
	return res, ctx.Err()
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
