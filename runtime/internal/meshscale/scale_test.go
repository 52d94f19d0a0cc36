package meshscale_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// roleEnv holds a process's role when the test binary runs as a host of
// members ("host " + the JSON of a hostSpec) or as a probe ("probe " +
// a probeSpec).
const roleEnv = "WIZARD_MESHSCALE_ROLE"

func TestMain(m *testing.M) {
	role := os.Getenv(roleEnv)
	if role == "" {
		os.Exit(m.Run())
	}
	var err error
	switch kind, spec, _ := strings.Cut(role, " "); kind {
	case "host":
		var s hostSpec
		if err = json.Unmarshal([]byte(spec), &s); err == nil {
			err = runHost(s)
		}
	case "probe":
		var s probeSpec
		if err = json.Unmarshal([]byte(spec), &s); err == nil {
			err = runProbe(s)
		}
	default:
		err = fmt.Errorf("%s=%q", roleEnv, role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "meshscale:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// settings are the run's knobs, from the environment.
type settings struct {
	sizes    []int
	procs    int
	patterns int
	trials   int
	rest     time.Duration
	wait     time.Duration // the longest wait for a condition on every member
	preset   string
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func load(t *testing.T) settings {
	s := settings{sizes: []int{50, 100, 200, 500}, procs: envInt("WIZARD_SCALE_PROCS", 4), patterns: envInt("WIZARD_SCALE_PATTERNS", 100),
		trials: envInt("WIZARD_SCALE_TRIALS", 3), rest: 30 * time.Second, wait: 3 * time.Minute, preset: "lan"}
	if v := os.Getenv("WIZARD_SCALE_SIZES"); v != "" {
		s.sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 3 {
				t.Fatalf("WIZARD_SCALE_SIZES=%q: want sizes of 3 or more, comma-separated", v)
			}
			s.sizes = append(s.sizes, n)
		}
	}
	if v := os.Getenv("WIZARD_SCALE_REST"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("WIZARD_SCALE_REST=%q: %v", v, err)
		}
		s.rest = d
	}
	if v := os.Getenv("WIZARD_SCALE_WAIT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("WIZARD_SCALE_WAIT=%q: %v", v, err)
		}
		s.wait = d
	}
	if v := os.Getenv("WIZARD_SCALE_PRESET"); v != "" {
		s.preset = v
	}
	return s
}

// proc is a child process: the test binary as a host or a probe.
type proc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan hostMsg
}

func spawn(t *testing.T, role string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+role)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, in: in, lines: make(chan hostMsg, 16)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(outp)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var m hostMsg
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				p.lines <- m
			}
		}
	}()
	return p
}

// guard bounds every wait on a child: a mesh of hundreds of members on a
// shared 2-core machine is slow, but not this slow.
const guard = 10 * time.Minute

func (p *proc) recv(t *testing.T, what string) hostMsg {
	t.Helper()
	select {
	case m, ok := <-p.lines:
		if !ok {
			t.Fatalf("%s: the child exited (%v)", what, p.cmd.Wait())
		}
		if m.Err != "" {
			t.Fatalf("%s: %s", what, m.Err)
		}
		return m
	case <-time.After(guard):
		t.Fatalf("%s: no answer within %v", what, guard)
		panic("unreachable")
	}
}

func (p *proc) stop() {
	p.in.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// all sends cmd to every host and returns their answers.
func all(t *testing.T, hosts []*proc, cmd string) []hostMsg {
	t.Helper()
	for _, h := range hosts {
		fmt.Fprintln(h.in, cmd)
	}
	out := make([]hostMsg, len(hosts))
	for i, h := range hosts {
		out[i] = h.recv(t, cmd)
	}
	return out
}

func latest(ms []hostMsg) time.Time {
	var at int64
	for _, m := range ms {
		at = max(at, m.At)
	}
	return time.Unix(0, at)
}

// missing is the number of members on which the condition did not hold
// within the wait.
func missing(ms []hostMsg) int {
	n := 0
	for _, m := range ms {
		n += m.Left
	}
	return n
}

// figures are one size's measurements.
type figures struct {
	n, hosts            int
	files               uint64
	formed, grown       time.Duration // the mesh formed (one pattern each); every member's 99 new patterns routed everywhere
	formedMissing       int           // members not yet routing every other within the wait
	grownMissing        int
	joins, unrouted     []time.Duration
	dead                []time.Duration
	udpRate, tcpRate    float64 // gossip bytes/s per member at rest
	cpu                 float64 // CPU per member at rest, fraction of a core
	catalogPer100       float64 // bytes of heap per member per 100 remote patterns
	heap0, heap1        uint64
	remotePerMember     int
	membersMeasuredRest int
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 0, 64) + " ms" }

func msList(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, strconv.FormatFloat(float64(d)/1e6, 'f', 0, 64))
	}
	return strings.Join(s, ", ")
}

// measure runs a mesh of n members (n-1 in the host processes, the n-th a
// probe process started and killed per trial) and measures it.
func measure(t *testing.T, s settings, n int) figures {
	f := figures{n: n}
	members := n - 1
	nh := min(s.procs, members)
	f.hosts = nh
	specs := make([]hostSpec, nh)
	first := 0
	for i := range specs {
		c := members / nh
		if i < members%nh {
			c++
		}
		specs[i] = hostSpec{First: first, Count: c, Size: members, Patterns: s.patterns, Preset: s.preset, Wait: s.wait}
		first += c
	}
	role := func(sp hostSpec) string { b, _ := json.Marshal(sp); return "host " + string(b) }
	start := time.Now()
	hosts := []*proc{spawn(t, role(specs[0]))}
	defer func() {
		for _, h := range hosts {
			h.stop()
		}
	}()
	seed := hosts[0].recv(t, "the seed").Seed
	for _, sp := range specs[1:] {
		sp.Seed = seed
		hosts = append(hosts, spawn(t, role(sp)))
	}
	var gossip []string
	for _, h := range hosts {
		m := h.recv(t, "start")
		gossip = append(gossip, m.Gossip...)
		f.files = m.Files
	}
	base := all(t, hosts, "base")
	f.formed, f.formedMissing = latest(base).Sub(start), missing(base)
	t.Logf("N=%d: %d members in %d processes started, each routing every other's first pattern, after %v (%d members still short of some)", n, members, nh, f.formed.Round(time.Millisecond), f.formedMissing)

	if f.formedMissing > 0 {
		// Every later phase would measure a mesh that is not one.
		t.Logf("N=%d: the mesh did not form within %v: %d of %d members still did not route every other", n, s.wait, f.formedMissing, members)
		return f
	}

	var h0, h1 uint64
	for _, m := range all(t, hosts, "heap") {
		h0 += m.Heap
	}
	grow := latest(all(t, hosts, "grow"))
	grown := all(t, hosts, "grown")
	f.grown, f.grownMissing = latest(grown).Sub(grow), missing(grown)
	for _, m := range all(t, hosts, "heap") {
		h1 += m.Heap
	}
	f.heap0, f.heap1 = h0, h1
	// Each member took (members-1) × (patterns-1) remote patterns into
	// its catalog (and served patterns-1 more of its own).
	f.remotePerMember = (members - 1) * (s.patterns - 1)
	f.catalogPer100 = (float64(h1) - float64(h0)) / float64(members) / float64(f.remotePerMember) * 100
	t.Logf("N=%d: every member's %d new patterns routed everywhere %v after they were added (%d members still short of some); live heap %d → %d bytes: %.0f bytes per member per 100 remote patterns",
		n, s.patterns-1, f.grown.Round(time.Millisecond), f.grownMissing, h0, h1, f.catalogPer100)

	var udp, tcp, cpu, win float64
	var cnt int
	for _, m := range all(t, hosts, "rest "+s.rest.String()) {
		udp += float64(m.UDP)
		tcp += float64(m.TCP)
		cpu += float64(m.CPU)
		win = max(win, float64(m.Window))
		cnt += m.Members
	}
	secs := win / 1e9
	f.udpRate, f.tcpRate, f.cpu, f.membersMeasuredRest = udp/float64(cnt)/secs, tcp/float64(cnt)/secs, cpu/float64(cnt)/win, cnt
	t.Logf("N=%d at rest over %v: gossip sent per member %.0f B/s UDP + %.0f B/s TCP; CPU per member %.3f%% of a core", n, s.rest, f.udpRate, f.tcpRate, 100*f.cpu)

	for i := range s.trials {
		id := fmt.Sprintf("p%02d", i)
		b, _ := json.Marshal(probeSpec{ID: id, Seed: gossip[(i*37+11)%len(gossip)], Patterns: s.patterns, Preset: s.preset})
		probe := spawn(t, "probe "+string(b))
		began := time.Unix(0, probe.recv(t, "probe start").At)
		js := all(t, hosts, fmt.Sprintf("joined %s %d", id, s.patterns))
		f.joins = append(f.joins, latest(js).Sub(began))
		if m := missing(js); m > 0 {
			t.Errorf("N=%d trial %d: %d members did not route the new member within %v", n, i, m, s.wait)
		}
		killed := time.Now()
		probe.cmd.Process.Kill() // a crash: its sockets closed, no leave
		probe.cmd.Wait()
		f.unrouted = append(f.unrouted, latest(all(t, hosts, "unrouted "+id)).Sub(killed))
		f.dead = append(f.dead, latest(all(t, hosts, "dead "+id)).Sub(killed))
		t.Logf("N=%d trial %d: start → routable on all %d others %v; crash → out of routing on all %v, out of membership (declared dead) on all %v",
			n, i, members, f.joins[i].Round(time.Millisecond), f.unrouted[i].Round(time.Millisecond), f.dead[i].Round(time.Millisecond))
	}
	return f
}

// TestScale measures how gossip and catalogs cost as the mesh grows
// (make scale; see the package documentation).
func TestScale(t *testing.T) {
	if os.Getenv("WIZARD_SCALE") != "1" {
		t.Skip("the mesh growth measurement runs with WIZARD_SCALE=1 (make scale; sizes in WIZARD_SCALE_SIZES, default 50,100,200,500: minutes per size)")
	}
	s := load(t)
	var rows []figures
	for _, n := range s.sizes {
		f := measure(t, s, n)
		rows = append(rows, f)
		if f.formedMissing > 0 {
			t.Logf("larger sizes skipped: N=%d did not form", n)
			break
		}
	}
	report := table(s, rows)
	t.Log("\n" + report)
	if p := os.Getenv("WIZARD_SCALE_REPORT"); p != "" {
		if err := os.WriteFile(p, []byte(report), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// table renders the figures and the targets as Markdown.
func table(s settings, rows []figures) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Preset %s, %d patterns per member, %d trials per size, rest window %v, members in %d host processes + 1 probe process.\n\n",
		strings.ToUpper(s.preset), s.patterns, s.trials, s.rest, s.procs)
	b.WriteString("| N | mesh formed | new patterns routed everywhere | start → routable everywhere (median; trials, ms) | crash → out of routing (median; trials) | crash → declared dead everywhere (median; trials) | gossip B/s per member at rest (UDP + TCP) | CPU per member at rest | catalog heap per member per 100 remote patterns |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		if r.formedMissing > 0 {
			fmt.Fprintf(&b, "| %d | not within %v (%d of %d members short) | | | | | | | |\n", r.n, s.wait, r.formedMissing, r.n-1)
			continue
		}
		grown := ms(r.grown)
		if r.grownMissing > 0 {
			grown = fmt.Sprintf("not within %v (%d of %d members short)", s.wait, r.grownMissing, r.n-1)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s (%s) | %s (%s) | %s (%s) | %.0f + %.0f = %.0f | %.3f%% of a core | %.1f KiB |\n",
			r.n, ms(r.formed), grown, ms(median(r.joins)), msList(r.joins), ms(median(r.unrouted)), msList(r.unrouted),
			ms(median(r.dead)), msList(r.dead), r.udpRate, r.tcpRate, r.udpRate+r.tcpRate, 100*r.cpu, r.catalogPer100/1024)
	}
	// Joins and crashes count where the mesh formed; the figures at rest
	// and the heap only where the new patterns settled (else the window
	// was not at rest, and the catalogs not all in).
	formed := slices.DeleteFunc(slices.Clone(rows), func(r figures) bool { return r.formedMissing > 0 })
	settled := slices.DeleteFunc(slices.Clone(formed), func(r figures) bool { return r.grownMissing > 0 })
	b.WriteString("\n")
	if len(formed) >= 2 {
		lo, hi := formed[0], formed[len(formed)-1]
		j := float64(median(hi.joins)) / float64(median(lo.joins))
		d := float64(median(hi.dead)) / float64(median(lo.dead))
		logRatio := math.Log(float64(hi.n)) / math.Log(float64(lo.n))
		fmt.Fprintf(&b, "N=%d against N=%d: start → routable %.2fx (target ≤ 3x; log N grows %.2fx), crash → declared dead %.2fx.\n", hi.n, lo.n, j, logRatio, d)
	}
	if len(settled) >= 2 {
		lo, hi := settled[0], settled[len(settled)-1]
		g := (hi.udpRate + hi.tcpRate) / (lo.udpRate + lo.tcpRate)
		fmt.Fprintf(&b, "Settled, N=%d against N=%d: gossip bytes/s per member %.2fx (target flat: 1x).\n", hi.n, lo.n, g)
	}
	worst := 0.0
	for _, r := range settled {
		worst = max(worst, r.catalogPer100)
	}
	if len(settled) > 0 {
		fmt.Fprintf(&b, "Largest catalog heap per member per 100 remote patterns: %.1f KiB (target ≤ 64 KiB).\n", worst/1024)
	}
	return b.String()
}
