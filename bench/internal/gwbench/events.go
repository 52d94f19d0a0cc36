package gwbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// EventsConfig is the event push scenario: Clients WebSocket clients of
// wizard-gateway, each with one subscription, and an emitter node in the
// mesh emitting events for Duration; each pass of Passes (the names of
// [EventPasses]; empty: none) has a fresh gateway and emitter.
type EventsConfig struct {
	Clients  int
	Passes   []string
	Duration time.Duration
	// Rates are the broadcast pass's offered events/s (every client hears
	// each), one run each; UserRates the per-user pass's, over all users
	// (each client hears its own). 0: as fast as acknowledged emits go,
	// Inflight at a time.
	Rates, UserRates []int
	// Inflight bounds the emitter's emits in flight (0: 32).
	Inflight int
}

// EventPass is one pass of the event push scenario.
type EventPass struct {
	Name    string // "broadcast", "per-user"
	PerUser bool   // each client subscribes to its own user's events (a JWT and a template); false: one pattern all share
}

// Title labels the pass in tables.
func (p EventPass) Title() string {
	if p.PerUser {
		return "per user (JWT HS256, `user:{auth.subject}`)"
	}
	return "broadcast (one pattern, every client)"
}

// EventPasses are the event push scenario's passes, in run order.
var EventPasses = []EventPass{
	{Name: "broadcast"},
	{Name: "per-user", PerUser: true},
}

// The events' patterns: the routes' entries, and what the emitter emits
// (per user with the pair user:user-<i> added).
const (
	eventBroadcast = "role:gwbench,event:tick"
	eventPerUser   = "role:gwbench,event:mine"
	eventQueue     = 64 // websocket.event_queue, the gateway's default, written out in the config to be reported
)

// EventsResult is what one pass of the event push measured. A "frame" is
// one event frame received by one client: a broadcast event is as many
// frames as there are clients, a per-user event one.
type EventsResult struct {
	Pass    EventPass
	Gateway string // WizardGateway, or WizardBaseline: the run of Config.BaselineGateway's binary paired with it
	Clients int
	Rate    float64 // offered events/s, 0 for as fast as acknowledged emits go
	Emit    emitResult
	// Expected are the frames the clients should have received: for each
	// emitted event, one per client subscribed to it.
	Expected, Received int64
	// Lost are the expected frames no client received (Gaps of them below
	// a frame the client received, the rest after its last one);
	// LossyClients the clients that missed at least one; Duplicates
	// frames received twice.
	Lost, Gaps, Duplicates int64
	LossyClients           int
	MaxLost                int64 // the most one client missed
	Latency                Stats // emit to receipt, every frame received
	// DeliveredFor is the time from the first emit to the last frame
	// received (the drain included); Received/DeliveredFor is the frames
	// delivered per second.
	DeliveredFor time.Duration
	Connect      Stats     // a client's dial, auth frame and sub frame
	Res          Resources // the gateway's, from the subscriptions open to the drain's end
	// GatewayCPU is the gateway's CPU time (user and system) over the
	// same time: divided by the frames, what a frame cost it, which
	// waiting for a core on a busy machine does not lengthen.
	GatewayCPU time.Duration
	// LoadCPU and EmitterCPU are the load generator's (this process's)
	// and the emitter's average CPU, % of one core, over the same time.
	LoadCPU, EmitterCPU float64
}

// EmittedPerSec is the events emitted per second of the emits' time.
func (r EventsResult) EmittedPerSec() float64 {
	if d := r.Emit.End.Sub(r.Emit.Start); d > 0 {
		return float64(r.Emit.Emitted) / d.Seconds()
	}
	return 0
}

// DeliveredPerSec is the frames received per second from the first emit
// to the last frame.
func (r EventsResult) DeliveredPerSec() float64 {
	if r.DeliveredFor > 0 {
		return float64(r.Received) / r.DeliveredFor.Seconds()
	}
	return 0
}

// eventsGatewayConfig is wizard-gateway's YAML for the event push and the
// server streams: the echo route (so that /readyz answers once the mesh is
// joined), a broadcast route anyone may subscribe to, a per-user route
// whose entry is filled from the verified subject, the streamer's server
// stream route (client i opens /stream/i); its node listens on meshPort,
// where the emitter joins it, and has peers (the echo node, and the
// streamer).
func eventsGatewayConfig(port, meshPort int, peers []string, s *signer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "server: {listen: \"127.0.0.1:%d\"}\n", port)
	fmt.Fprintf(&b, "mesh: {transport: tcp, listen: \"127.0.0.1:%d\", peers: [", meshPort)
	for i, p := range peers {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", p)
	}
	b.WriteString("]}\n")
	if s != nil {
		fmt.Fprintf(&b, "auth:\n  jwt: {keys: [%q], issuer: %q, audience: %q, algorithms: [%s]}\n", s.keyFile, jwtIssuer, jwtAudience, s.alg)
	}
	b.WriteString("defaults: {timeout: 30s, max_timeout: 30s, auth: none}\n")
	fmt.Fprintf(&b, "websocket: {path: /ws, max_inflight_per_conn: 64, event_queue: %d, event_overflow: drop_oldest}\n", eventQueue)
	b.WriteString("access_log: {enabled: false}\n")
	b.WriteString("routes:\n  - {name: echo, method: POST, path: /echo, pattern: \"" + echoPattern + "\"}\n")
	b.WriteString("  - {name: ticks, method: GET, path: /ticks, pattern: \"role:gwbench,cmd:ticks\", events: [\"" + eventBroadcast + "\"]}\n")
	b.WriteString("  - {name: stream, method: GET, path: \"/stream/{c}\", pattern: \"" + streamPattern + "\", vars: {c: {regex: \"[0-9]+\"}}, stream: server}\n")
	if s != nil {
		b.WriteString("  - {name: mine, method: GET, path: /mine, pattern: \"role:gwbench,cmd:mine\", auth: required, events: [\"" + eventPerUser + ",user:{auth.subject}\"]}\n")
	}
	return b.String()
}

// startEventsGateway starts wizard-gateway's binary bin with
// eventsGatewayConfig (see startWizardGatewayBin, which it follows: with a
// profile directory, this tree's package gateway in a process of this
// binary, profiled) and waits until /readyz answers; it returns the
// gateway and its node's mesh address.
func (e *env) startEventsGateway(ctx context.Context, bin string, s *signer, label string, peers ...string) (*gateway, string, error) {
	port, err1 := freePort()
	meshPort, err2 := freePort()
	if err := errors.Join(err1, err2); err != nil {
		return nil, "", err
	}
	name := "wizard-gateway-" + label
	file := filepath.Join(e.dir, name+".yaml")
	if err := os.WriteFile(file, []byte(eventsGatewayConfig(port, meshPort, append([]string{e.echo.addr}, peers...), s)), 0o644); err != nil {
		return nil, "", err
	}
	var p *proc
	var err error
	if e.profDir != "" && bin == e.gwBin {
		dir := filepath.Join(e.profDir, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, "", err
		}
		p, err = e.child(ctx, childSpec{Role: roleProfGateway, Config: file, Dir: dir})
	} else {
		cmd := exec.Command(bin, "-c", file, "-l", "warn")
		cmd.Env = append(os.Environ(), e.gwEnv...)
		p, err = e.start(ctx, name, cmd, false)
	}
	if err != nil {
		return nil, "", err
	}
	gwName := WizardGateway
	if bin != e.gwBin {
		gwName = WizardBaseline
	}
	g := &gateway{name: gwName, client: e.httpClient, main: p, procs: []*proc{p}, base: "http://127.0.0.1:" + strconv.Itoa(port)}
	if err := waitReady(ctx, g.base+"/readyz", p); err != nil {
		e.stop(p)
		return nil, "", fmt.Errorf("wizard-gateway: %w", err)
	}
	return g, "127.0.0.1:" + strconv.Itoa(meshPort), nil
}

// eventPasses runs the passes of cfg.Events into rep.
func (e *env) eventPasses(ctx context.Context, cfg Config, rep *Report, logf func(string, ...any)) error {
	ec := cfg.Events
	if ec.Clients <= 0 || len(ec.Passes) == 0 {
		return nil
	}
	for _, name := range ec.Passes {
		if !slices.ContainsFunc(EventPasses, func(p EventPass) bool { return p.Name == name }) {
			return fmt.Errorf("gwbench: no event push pass %q (want broadcast or per-user)", name)
		}
	}
	for _, p := range EventPasses {
		if !slices.Contains(ec.Passes, p.Name) {
			continue
		}
		rates := ec.Rates
		if p.PerUser {
			rates = ec.UserRates
		}
		for k, rate := range rates {
			for _, bin := range e.passBins(k) {
				r, err := e.eventsPass(ctx, ec, bin, p, float64(rate), logf)
				if err != nil {
					return fmt.Errorf("event push, %s at %d events/s: %w", p.Name, rate, err)
				}
				rep.Events = append(rep.Events, r)
			}
		}
	}
	return nil
}

// eventsPass starts an emitter and a gateway for p, connects and
// subscribes the clients, has the emitter emit, waits for the frames and
// stops both.
func (e *env) eventsPass(ctx context.Context, cfg EventsConfig, bin string, p EventPass, rate float64, logf func(string, ...any)) (EventsResult, error) {
	res := EventsResult{Pass: p, Clients: cfg.Clients, Rate: rate, Gateway: WizardGateway}
	label := "events-" + p.Name + "-" + strconv.FormatFloat(rate, 'f', -1, 64)
	if bin != e.gwBin {
		res.Gateway, label = WizardBaseline, label+"-baseline"
	}
	var sign *signer
	if p.PerUser {
		var err error
		if sign, err = newSigner("HS256", e.dir); err != nil {
			return res, err
		}
	}
	g, meshAddr, err := e.startEventsGateway(ctx, bin, sign, label)
	if err != nil {
		return res, err
	}
	defer e.stopGateway(g)
	em, err := e.child(ctx, childSpec{Role: roleEmitter, Upstream: meshAddr})
	if err != nil {
		return res, err
	}
	defer e.stop(em)
	name := p.Name + "@" + strconv.FormatFloat(rate, 'f', -1, 64)
	if res.Gateway == WizardBaseline {
		name += " (baseline)"
	}
	logf("event push, %-10s wizard-gateway pid %d on %s, emitter pid %d", name, g.main.pid(), g.base, em.pid())

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	subs, connects, err := subscribeAll(cctx, g.wsURL(), cfg.Clients, sign)
	defer func() {
		for _, s := range subs {
			if s != nil {
				s.c.CloseNow()
			}
		}
	}()
	if err != nil {
		return res, err
	}
	res.Connect = summarise(connects, 0, "", 0)
	logf("event push, %-10s %d clients subscribed (connect+sub p50 %v, p99 %v)", name, cfg.Clients, dur(res.Connect.P50), dur(res.Connect.P99))

	mons, err := startPushMonitors(g.main.pid(), em.pid())
	if err != nil {
		return res, err
	}
	var received atomic.Int64
	var rg sync.WaitGroup
	for _, s := range subs {
		rg.Go(func() { s.receive(cctx, &received) })
	}
	q := emitRun{Pattern: eventBroadcast, Rate: res.Rate, Inflight: cmpOr(cfg.Inflight, 32), Duration: cfg.Duration}
	if p.PerUser {
		q.Pattern, q.Users = eventPerUser, cfg.Clients
	}
	fail := func(err error) (EventsResult, error) {
		cancel()
		rg.Wait()
		mons.stop()
		return res, err
	}
	qb, _ := json.Marshal(q)
	line, err := em.Ask(ctx, string(qb), cfg.Duration+3*time.Minute)
	if err != nil {
		return fail(err)
	}
	if err := json.Unmarshal([]byte(line), &res.Emit); err != nil {
		return fail(fmt.Errorf("the emitter answered %q: %w", line, err))
	}
	if res.Emit.Err != "" {
		return fail(fmt.Errorf("the emitter: %s", res.Emit.Err))
	}
	// Expected frames: every emitted event, to each client subscribed.
	want := make([]int64, cfg.Clients)
	for i := range want {
		if p.PerUser {
			want[i] = res.Emit.Emitted / int64(cfg.Clients)
			if int64(i) < res.Emit.Emitted%int64(cfg.Clients) {
				want[i]++
			}
		} else {
			want[i] = res.Emit.Emitted
		}
		res.Expected += want[i]
	}
	// The drain: until every expected frame came or none came for 5 s (a
	// frame dropped from a full queue never comes).
	last, lastAt := received.Load(), time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	for n := last; n < res.Expected && time.Since(lastAt) < 5*time.Second && ctx.Err() == nil; n = received.Load() {
		if n != last {
			last, lastAt = n, time.Now()
		}
		<-tick.C
	}
	tick.Stop()
	cancel()
	rg.Wait()
	figs, err := mons.finish()
	if err != nil {
		return res, err
	}
	res.GatewayCPU, res.Res, res.LoadCPU, res.EmitterCPU = figs.GatewayCPU, figs.Res, figs.LoadCPU, figs.PushCPU

	if err := res.tally(want, subs); err != nil {
		return res, err
	}
	logf("event push, %-10s %d events emitted (%.0f/s, %d errors), %d of %d frames received (%.0f/s), %d lost, p50 %v p99 %v max %v, gateway CPU avg %.0f%% (%v a frame) RSS %.1f -> %.1f MiB",
		name, res.Emit.Emitted, res.EmittedPerSec(), res.Emit.Errors, res.Received, res.Expected, res.DeliveredPerSec(), res.Lost,
		dur(res.Latency.P50), dur(res.Latency.P99), dur(res.Latency.Max), res.Res.AvgCPU, dur(res.GatewayCPU/time.Duration(max(res.Received, 1))), mib(res.Res.StartRSS), mib(res.Res.MaxRSS))
	return res, ctx.Err()
}

// Rates parses the comma-separated offered rates of flag name: events/s,
// 0 for as fast as acknowledged emits go.
func Rates(name, s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("-%s: %q is not a rate (events/s, 0 for as fast as acknowledged emits go)", name, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// tally counts what the subscribers received against want (the frames
// each should have had: seqs 0 to want-1) into r: frames received, lost,
// duplicated, the latencies. A frame that was no event of its client's
// subscription, or a seq never emitted to it, is an error.
func (r *EventsResult) tally(want []int64, subs []*subscriber) error {
	var lat []time.Duration
	var lastRecv time.Time
	for i, s := range subs {
		if s.bad != "" {
			return fmt.Errorf("client %d: %s", i, s.bad)
		}
		if s.maxSeq >= want[i] {
			return fmt.Errorf("client %d received seq %d, but %d events were emitted to it", i, s.maxSeq, want[i])
		}
		got := s.seen.count()
		r.Received += got + s.dups
		r.Duplicates += s.dups
		if lost := want[i] - got; lost > 0 {
			r.Lost += lost
			r.LossyClients++
			r.MaxLost = max(r.MaxLost, lost)
			r.Gaps += s.maxSeq + 1 - got // 0 when none came: maxSeq is -1
		}
		lat = append(lat, s.lat...)
		if s.lastAt.After(lastRecv) {
			lastRecv = s.lastAt
		}
	}
	r.Latency = summarise(lat, 0, "", 0)
	if !lastRecv.IsZero() {
		r.DeliveredFor = lastRecv.Sub(r.Emit.Start)
	}
	return nil
}

func cmpOr(v, d int) int {
	if v > 0 {
		return v
	}
	return d
}

// subscriber is one WebSocket client of the event push with its one
// subscription, and what it received.
type subscriber struct {
	c      *websocket.Conn
	prefix []byte // its event frames' start, up to the data: the subscription's id and pattern
	seen   bitset
	dups   int64
	maxSeq int64 // -1: nothing yet
	lat    []time.Duration
	lastAt time.Time
	bad    string // a frame that was not an event of the subscription
}

// subscribeAll connects n clients to url, at most 64 at a time, each
// authenticating with its user's token when s is set and subscribing to
// the broadcast route or to its own user's events; it returns them with
// their connect times.
func subscribeAll(ctx context.Context, url string, n int, s *signer) ([]*subscriber, []time.Duration, error) {
	subs := make([]*subscriber, n)
	times := make([]time.Duration, n)
	var errs errCount
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t0 := time.Now()
			sub, err := subscribe(ctx, url, i, s)
			if err != nil {
				errs.add(fmt.Errorf("client %d: %w", i, err))
				return
			}
			times[i] = time.Since(t0)
			subs[i] = sub
		})
	}
	wg.Wait()
	if errs.n.Load() > 0 {
		return subs, nil, fmt.Errorf("%d of %d clients could not subscribe; the first: %s", errs.n.Load(), n, errs.firstErr())
	}
	return subs, times, nil
}

// subscribe connects client i and subscribes it.
func subscribe(ctx context.Context, url string, i int, s *signer) (*subscriber, error) {
	token, route := "", "ticks"
	if s != nil {
		var err error
		if token, err = s.token(userName(i), time.Hour); err != nil {
			return nil, err
		}
		route = "mine"
	}
	w, err := dialWS(ctx, url, token)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := w.c.Write(sctx, websocket.MessageText, []byte(`{"type":"sub","id":"e","route":"`+route+`"}`)); err != nil {
		w.c.CloseNow()
		return nil, err
	}
	_, data, err := w.c.Read(sctx)
	if err != nil {
		w.c.CloseNow()
		return nil, err
	}
	var r struct {
		Type    string          `json:"type"`
		OK      bool            `json:"ok"`
		Pattern string          `json:"pattern"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(data, &r); err != nil || r.Type != "sub" || !r.OK || r.Pattern == "" {
		w.c.CloseNow()
		return nil, fmt.Errorf("sub frame answered %.300s", data)
	}
	pat, _ := json.Marshal(r.Pattern)
	prefix := append(append([]byte(`{"type":"event","sub":"e","pattern":`), pat...), `,"data":`...)
	return &subscriber{c: w.c, prefix: prefix, maxSeq: -1, lat: make([]time.Duration, 0, 1024)}, nil
}

// receive reads event frames until ctx ends, noting each one's seq and
// its latency from the emit time it carries (both wall clock, Unix
// nanoseconds, read on the same machine).
func (s *subscriber) receive(ctx context.Context, received *atomic.Int64) {
	for {
		_, data, err := s.c.Read(ctx)
		now := time.Now()
		if err != nil {
			return
		}
		seq, t, ok := eventFields(data)
		if !ok || !bytes.HasPrefix(data, s.prefix) {
			if s.bad == "" {
				s.bad = fmt.Sprintf("not an event frame of its subscription (%s…) with seq and t: %.200s", s.prefix, data)
			}
			continue
		}
		if s.seen.set(seq) {
			s.dups++
		}
		s.maxSeq = max(s.maxSeq, seq)
		s.lat = append(s.lat, time.Duration(now.UnixNano()-t))
		s.lastAt = now
		received.Add(1)
	}
}

// eventFields reads seq and t from an event frame
// {"type":"event","sub":"e","pattern":"…","data":{"seq":S,"t":T,…}}
// without a JSON decoder: the load generator shares the cores with the
// gateway, and reads up to some 100,000 of them a second.
func eventFields(b []byte) (seq, t int64, ok bool) {
	if !bytes.HasPrefix(b, []byte(`{"type":"event","sub":"e",`)) {
		return 0, 0, false
	}
	i := bytes.Index(b, []byte(`"data":`))
	if i < 0 {
		return 0, 0, false
	}
	d := b[i:]
	seq, ok1 := intField(d, `"seq":`)
	t, ok2 := intField(d, `"t":`)
	return seq, t, ok1 && ok2
}

func intField(b []byte, key string) (int64, bool) {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return 0, false
	}
	b = b[i+len(key):]
	j := 0
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	v, err := strconv.ParseInt(string(b[:j]), 10, 64)
	return v, err == nil
}

// bitset is a growable set of non-negative integers.
type bitset struct{ w []uint64 }

// set adds i and reports whether it was there already.
func (b *bitset) set(i int64) bool {
	k := int(i / 64)
	if k >= len(b.w) {
		b.w = append(b.w, make([]uint64, k+1-len(b.w))...)
	}
	m := uint64(1) << (i % 64)
	had := b.w[k]&m != 0
	b.w[k] |= m
	return had
}

func (b *bitset) count() int64 {
	var n int
	for _, w := range b.w {
		n += bits.OnesCount64(w)
	}
	return int64(n)
}
