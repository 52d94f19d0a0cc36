package evbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
	"github.com/wizardmesh/wizard/bench/internal/harness"
)

// Config is what [Run] measures.
type Config struct {
	// Contenders names the contenders to run (all when empty); one named
	// that cannot run fails the run, one left out by default is reported
	// as not measured.
	Contenders []string
	// Groups lists the numbers of groups an event goes to; Members the
	// numbers of members (subscriber processes) in each group; Emitters
	// the numbers of concurrent emitting loops in the emitter process.
	Groups, Members, Emitters []int
	// Each cell is run Runs times, the contenders taking turns (each run
	// starting with the next one); the events handled in Duration after
	// Warmup count.
	Runs             int
	Warmup, Duration time.Duration
	// ProfileDir, when set, receives CPU and allocation profiles of each
	// Go contender's emitter and first member.
	ProfileDir string
	// Log receives progress lines (nil: none); Stderr the children's
	// standard error (nil: the parent's).
	Log, Stderr io.Writer
	// Command is the command line printed in the report.
	Command string
}

// Cell is the median of the runs of one contender in one setting.
type Cell struct {
	Name, Title                string
	Groups, Members, Emitters  int
	EventsPerSec               float64 // events handled by every group per second
	P50, P99                   time.Duration
	CPUEmitter, CPUSubs, CPUBr time.Duration // per event
	AllocsEmitter, AllocsSubs  float64       // per event (Go processes)
	Lost, Errors               int64         // events, every run together
	FirstErr                   string
	Runs                       []float64 // events/s of each run, in run order
}

// Report is what [Run] measured.
type Report struct {
	Config    Config
	Env       harness.Env
	Measured  []contender
	Gaps      [][2]string // contender title, why not measured
	Cells     []Cell
	StartedAt time.Time
	Elapsed   time.Duration
	LoadEnd   string
}

// sample is one run of one cell.
type sample struct {
	rate                    float64
	p50, p99                time.Duration
	cpuEmit, cpuSubs, cpuBr time.Duration
	allocsEmit, allocsSubs  float64
	lost, errs              int64
	firstErr                string
	ok                      bool
}

// Run measures every setting: for each number of groups and of members,
// it starts every contender's processes, then runs each number of
// emitters Runs times, the contenders taking turns.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.Runs = max(cfg.Runs, 1)
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if len(cfg.Members) == 0 {
		cfg.Members = []int{1}
	}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", args...)
		}
	}
	rep := &Report{Config: cfg, Env: harness.Environment(), StartedAt: time.Now()}
	named := len(cfg.Contenders) > 0
	var cs []contender
	for _, c := range contenders {
		if named && !contains(cfg.Contenders, c.name) {
			continue
		}
		if c.gap != "" {
			if named {
				return nil, fmt.Errorf("events contender %s: %s", c.name, c.gap)
			}
			logf("%-22s not measured: %s", c.title, c.gap)
			rep.Gaps = append(rep.Gaps, [2]string{c.title, c.gap})
			continue
		}
		if c.node {
			if why := harness.PrepareNode(ctx, molDir); why != "" {
				if named || os.Getenv("WIZARD_REQUIRE") != "" {
					return nil, fmt.Errorf("events contender %s: %s", c.name, why)
				}
				logf("%-22s not measured: %s", c.title, why)
				rep.Gaps = append(rep.Gaps, [2]string{c.title, why})
				continue
			}
		}
		cs = append(cs, c)
	}
	for _, n := range cfg.Contenders {
		if _, err := contenderOf(n); err != nil {
			return nil, err
		}
	}
	rep.Measured = cs
	for _, g := range cfg.Groups {
		for _, m := range cfg.Members {
			if err := runSetting(ctx, cfg, rep, cs, g, m, logf); err != nil {
				return nil, err
			}
		}
	}
	rep.Elapsed = time.Since(rep.StartedAt)
	rep.LoadEnd = harness.LoadAverage()
	return rep, nil
}

func runSetting(ctx context.Context, cfg Config, rep *Report, cs []contender, groups, members int, logf func(string, ...any)) error {
	tops := make([]*topology, len(cs))
	defer func() {
		for _, t := range tops {
			if t != nil {
				if err := t.stop(); err != nil {
					logf("%v", err)
				}
			}
		}
	}()
	for i, c := range cs {
		t, err := startTopology(ctx, cfg, c, groups, members)
		if err != nil {
			return fmt.Errorf("%s, %d groups of %d: %w", c.title, groups, members, err)
		}
		tops[i] = t
		logf("%-22s %d group(s) of %d member(s) up", c.title, groups, members)
	}
	for _, n := range cfg.Emitters {
		samples := make([][]sample, len(cs))
		for r := range cfg.Runs {
			for k := range cs {
				i := (k + r) % len(cs)
				s, err := tops[i].measure(ctx, n, cfg.Warmup, cfg.Duration)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil {
					return fmt.Errorf("%s, %d groups of %d, %d emitters: %w", cs[i].title, groups, members, n, err)
				}
				logf("%-22s %2d groups x%d %3d emitters run %d/%d %10s ev/s  p50 %8v p99 %8v  CPU/ev emit %v subs %v broker %v  allocs/ev %.1f+%.1f  lost %d err %d %s",
					cs[i].title, groups, members, n, r+1, cfg.Runs, rate(s.rate), s.p50, s.p99, s.cpuEmit, s.cpuSubs, s.cpuBr,
					s.allocsEmit, s.allocsSubs, s.lost, s.errs, s.firstErr)
				samples[i] = append(samples[i], s)
			}
		}
		for i, c := range cs {
			rep.Cells = append(rep.Cells, cellOf(c, groups, members, n, samples[i]))
		}
	}
	return nil
}

func cellOf(c contender, groups, members, n int, ss []sample) Cell {
	cell := Cell{Name: c.name, Title: c.title, Groups: groups, Members: members, Emitters: n}
	var p50, p99, ce, cs, cb []time.Duration
	var ae, as []float64
	for _, s := range ss {
		cell.Runs = append(cell.Runs, s.rate)
		cell.Lost += s.lost
		cell.Errors += s.errs
		if cell.FirstErr == "" {
			cell.FirstErr = s.firstErr
		}
		p50, p99 = append(p50, s.p50), append(p99, s.p99)
		ce, cs, cb = append(ce, s.cpuEmit), append(cs, s.cpuSubs), append(cb, s.cpuBr)
		ae, as = append(ae, s.allocsEmit), append(as, s.allocsSubs)
	}
	cell.EventsPerSec = benchkit.Median(cell.Runs)
	cell.P50, cell.P99 = benchkit.Median(p50), benchkit.Median(p99)
	cell.CPUEmitter, cell.CPUSubs, cell.CPUBr = benchkit.Median(ce), benchkit.Median(cs), benchkit.Median(cb)
	cell.AllocsEmitter, cell.AllocsSubs = benchkit.Median(ae), benchkit.Median(as)
	return cell
}

// topology is one contender's processes in one setting.
type topology struct {
	c        contender
	groups   int
	broker   *benchkit.Proc
	subs     []*benchkit.Proc
	emitter  *benchkit.Proc
	storeDir string
}

func (t *topology) procs() []*benchkit.Proc {
	ps := append([]*benchkit.Proc{}, t.subs...)
	if t.emitter != nil {
		ps = append(ps, t.emitter)
	}
	if t.broker != nil {
		ps = append(ps, t.broker)
	}
	return ps
}

func (t *topology) stop() error {
	var errs []string
	if t.emitter != nil {
		if err := t.emitter.Stop(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	for _, p := range t.subs {
		if err := p.Stop(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if t.broker != nil {
		if err := t.broker.Stop(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if t.storeDir != "" {
		os.RemoveAll(t.storeDir)
	}
	if len(errs) > 0 {
		return fmt.Errorf("stopping %s: %s", t.c.title, strings.Join(errs, "; "))
	}
	return nil
}

func groupNames(n int) []string {
	var gs []string
	for i := range n {
		gs = append(gs, "g"+strconv.Itoa(i))
	}
	return gs
}

// startTopology starts c's broker (when it has one), its members, then
// its emitter, which answers once every group is known to it.
func startTopology(ctx context.Context, cfg Config, c contender, groups, members int) (t *topology, err error) {
	t = &topology{c: c, groups: groups}
	defer func() {
		if err != nil {
			t.stop()
			t = nil
		}
	}()
	gs := groupNames(groups)
	if c.node {
		return t, startNodeTopology(ctx, cfg, t, gs, members)
	}
	prof := func(role string) string {
		if cfg.ProfileDir == "" {
			return ""
		}
		return filepath.Join(cfg.ProfileDir, fmt.Sprintf("events-%s-%dx%d-%s.pprof", c.name, groups, members, role))
	}
	var broker string
	if c.broker {
		if t.storeDir, err = os.MkdirTemp("", "wizard-bench-events-"); err != nil {
			return t, err
		}
		if t.broker, err = startGo(ctx, cfg, spec{Contender: c.name, Role: roleBroker, StoreDir: t.storeDir}); err != nil {
			return t, err
		}
		broker = t.broker.Addr()
	}
	var addrs []string
	for _, g := range gs {
		for m := range members {
			s := spec{Contender: c.name, Role: roleSub, Group: g, Member: m, Broker: broker}
			if g == gs[0] && m == 0 {
				s.Profile = prof("sub")
			}
			p, err := startGo(ctx, cfg, s)
			if err != nil {
				return t, err
			}
			t.subs = append(t.subs, p)
			addrs = append(addrs, p.Addr())
		}
	}
	t.emitter, err = startGo(ctx, cfg, spec{Contender: c.name, Role: roleEmit, Groups: gs, Peers: addrs, Broker: broker, Profile: prof("emitter")})
	return t, err
}

// startGo re-executes the running binary as s says and waits for its
// first line.
func startGo(ctx context.Context, cfg Config, s spec) (*benchkit.Proc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	js, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envChild+"="+string(js))
	name := fmt.Sprintf("events %s %s %s", s.Contender, s.Role, s.Group)
	return benchkit.Start(ctx, name, cmd, benchkit.Options{Stderr: cfg.Stderr, Addr: true, AddrTimeout: 60 * time.Second})
}

// molDir is the bench module's folder with Moleculer and events.mjs.
const molDir = "moleculer"

// startNodeTopology starts Moleculer's members and emitter, each a
// broker in a Node.js process of its own on a port picked here, every
// one given the others' addresses (Moleculer's TCP transporter learns
// nodes from its list or from UDP discovery, which is off).
func startNodeTopology(ctx context.Context, cfg Config, t *topology, gs []string, members int) error {
	dir, err := harness.NodeDir(molDir)
	if err != nil {
		return err
	}
	type nodeSpec struct{ id, group string }
	var specs []nodeSpec
	for _, g := range gs {
		for m := range members {
			specs = append(specs, nodeSpec{fmt.Sprintf("%s-%d", g, m), g})
		}
	}
	specs = append(specs, nodeSpec{"emitter", ""})
	ports := make([]int, len(specs))
	for i := range specs {
		if ports[i], err = freePort(); err != nil {
			return err
		}
	}
	for i, s := range specs {
		var peers []string
		for j, o := range specs {
			if j != i {
				peers = append(peers, fmt.Sprintf("127.0.0.1:%d/%s", ports[j], o.id))
			}
		}
		role, env := "sub", []string{"GROUP=" + s.group}
		if s.group == "" {
			role, env = "emit", []string{"GROUPS=" + strings.Join(gs, ",")}
		}
		cmd := exec.Command("node", "events.mjs", role)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), append(env, "NODE_ENV=production", "NODE_ID="+s.id,
			"TCP_PORT="+strconv.Itoa(ports[i]), "PEERS="+strings.Join(peers, ","))...)
		p, err := benchkit.Start(ctx, "events moleculer "+role+" "+s.group, cmd, benchkit.Options{Stderr: cfg.Stderr, Addr: true, AddrTimeout: 60 * time.Second})
		if err != nil {
			return err
		}
		if role == "emit" {
			t.emitter = p
		} else {
			t.subs = append(t.subs, p)
		}
	}
	return nil
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

const askTimeout = 30 * time.Second

// totals returns the events every member has handled since it started.
func (t *topology) totals(ctx context.Context) (int64, error) {
	var sum int64
	for _, p := range t.subs {
		a, err := p.Ask(ctx, qTotal, askTimeout)
		if err != nil {
			return 0, err
		}
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s answered %q to %q", p.Name(), a, qTotal)
		}
		sum += n
	}
	return sum, nil
}

// snap reads and merges every member's histogram since its last snap.
func (t *topology) snap(ctx context.Context) (*hist, error) {
	var h hist
	for _, p := range t.subs {
		a, err := p.Ask(ctx, qSnap, askTimeout)
		if err != nil {
			return nil, err
		}
		if err := h.add(a); err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name(), err)
		}
	}
	return &h, nil
}

// usage is the CPU time and allocations of the processes at a moment.
type usage struct {
	emit, subs, broker     time.Duration
	mallocEmit, mallocSubs int64
}

func (t *topology) usage(ctx context.Context) (usage, error) {
	var u usage
	cpu := func(p *benchkit.Proc) time.Duration {
		d, _ := benchkit.CPU(p.Pid())
		return d
	}
	mallocs := func(p *benchkit.Proc) int64 {
		if t.c.node {
			return 0
		}
		a, err := p.Ask(ctx, qMallocs, askTimeout)
		if err != nil {
			return 0
		}
		n, _ := strconv.ParseInt(a, 10, 64)
		return n
	}
	u.emit, u.mallocEmit = cpu(t.emitter), mallocs(t.emitter)
	for _, p := range t.subs {
		u.subs += cpu(p)
		u.mallocSubs += mallocs(p)
	}
	if t.broker != nil {
		u.broker = cpu(t.broker)
	}
	return u, nil
}

// measure runs n emitters: after the warm-up, the members' histograms
// are read at the start and the end of the window; then the emitters
// stop and the events still on their way are let through (and those
// that never arrive counted lost) before the next run.
func (t *topology) measure(ctx context.Context, n int, warmup, d time.Duration) (sample, error) {
	var s sample
	before, err := t.totals(ctx)
	if err != nil {
		return s, err
	}
	if a, err := t.emitter.Ask(ctx, qStart+strconv.Itoa(n), askTimeout); err != nil || a != "ok" {
		return s, fmt.Errorf("emitter: start %d: %q %v", n, a, err)
	}
	stopped := false
	defer func() {
		if !stopped {
			t.emitter.Ask(ctx, qStop, askTimeout)
		}
	}()
	if err := sleep(ctx, warmup); err != nil {
		return s, err
	}
	if _, err := t.snap(ctx); err != nil {
		return s, err
	}
	u0, _ := t.usage(ctx)
	t0 := time.Now()
	if err := sleep(ctx, d); err != nil {
		return s, err
	}
	h, err := t.snap(ctx)
	if err != nil {
		return s, err
	}
	// A window in which no event was handled (a member starved of CPU on
	// a loaded machine, events queued behind a flood) is extended, d at a
	// time, until one is, for at most 10 s: the rate is then over the
	// longer window, and a contender that never delivers still fails.
	for guard := time.Now().Add(10 * time.Second); h.n == 0 && time.Now().Before(guard); {
		if err := sleep(ctx, d); err != nil {
			return s, err
		}
		if h, err = t.snap(ctx); err != nil {
			return s, err
		}
	}
	el := time.Since(t0)
	u1, _ := t.usage(ctx)
	stopped = true
	a, err := t.emitter.Ask(ctx, qStop, 3*askTimeout) // the loops finish their emits first
	if err != nil {
		return s, err
	}
	f := strings.SplitN(a, " ", 3)
	emitted, err1 := strconv.ParseInt(f[0], 10, 64)
	var err2 error
	if len(f) > 1 {
		s.errs, err2 = strconv.ParseInt(f[1], 10, 64)
	}
	if err1 != nil || err2 != nil {
		return s, fmt.Errorf("emitter answered %q to %q", a, qStop)
	}
	if len(f) > 2 {
		s.firstErr = f[2]
	}
	after, err := t.drain(ctx, before+emitted*int64(t.groups))
	if err != nil {
		return s, err
	}
	if miss := before + emitted*int64(t.groups) - after; miss > 0 {
		s.lost = (miss + int64(t.groups) - 1) / int64(t.groups)
	}
	events := float64(h.n) / float64(t.groups)
	if events == 0 {
		return s, fmt.Errorf("no event handled in %v (emitter: %s)", el, a)
	}
	s.rate = events / el.Seconds()
	s.p50, s.p99 = h.quantile(0.5), h.quantile(0.99)
	per := func(d time.Duration) time.Duration { return time.Duration(float64(d) / events) }
	s.cpuEmit, s.cpuSubs, s.cpuBr = per(u1.emit-u0.emit), per(u1.subs-u0.subs), per(u1.broker-u0.broker)
	s.allocsEmit = float64(u1.mallocEmit-u0.mallocEmit) / events
	s.allocsSubs = float64(u1.mallocSubs-u0.mallocSubs) / events
	s.ok = true
	return s, nil
}

// drain waits until the members have handled want events in all, at
// most 60 s; for a lossy contender, only until their count has stopped
// moving for 500 ms (the rest lost).
func (t *topology) drain(ctx context.Context, want int64) (int64, error) {
	deadline := time.Now().Add(60 * time.Second)
	last, still := int64(-1), time.Now()
	for {
		got, err := t.totals(ctx)
		if err != nil || got >= want {
			return got, err
		}
		if got != last {
			last, still = got, time.Now()
		}
		if (t.c.lossy && time.Since(still) > 500*time.Millisecond) || time.Now().After(deadline) {
			return got, nil
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return got, err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func rate(v float64) string {
	return strconv.FormatFloat(v, 'f', 0, 64)
}
