package meshscale_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	metrics "github.com/hashicorp/go-metrics"
	"github.com/hashicorp/memberlist"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/introspect"
	"github.com/wizardmesh/wizard/runtime/swim"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// hostSpec is what a host process runs: members first..first+count-1 of
// a mesh of size host members (ids memberID(i)), all seeded with seed
// (the first member of the first host starts without one).
type hostSpec struct {
	First, Count, Size int
	Seed               string
	Patterns           int
	Preset             string
	Wait               time.Duration // the longest wait for a condition on every member
}

// probeSpec is what a probe process runs: one member serving Patterns
// patterns, seeded with Seed.
type probeSpec struct {
	ID       string
	Seed     string
	Patterns int
	Preset   string
}

func memberID(i int) string { return fmt.Sprintf("m%03d", i) }

// patternOf is member id's pattern number i: each member serves its own.
func patternOf(id string, i int) string { return fmt.Sprintf("role:scale,member:%s,op:%d", id, i) }

// preset is the swim preset named s ("lan", the default, or "fast").
func preset(s string) swim.Preset {
	if s == "fast" {
		return swim.Fast
	}
	return swim.LAN
}

// gossipCounter counts the bytes memberlist reports it sent: its metrics
// memberlist.udp.sent (packets: probes, acks, gossip) and
// memberlist.tcp.sent (streams: joins, push-pull state syncs), payload
// bytes without IP, UDP or TCP headers. One per process, as memberlist's
// metrics are process-global.
type gossipCounter struct {
	metrics.BlackholeSink
	udp, tcp atomic.Int64
}

func (g *gossipCounter) IncrCounterWithLabels(key []string, val float32, _ []metrics.Label) {
	if len(key) < 2 || key[len(key)-1] != "sent" {
		return
	}
	switch key[len(key)-2] {
	case "udp":
		g.udp.Add(int64(val))
	case "tcp":
		g.tcp.Add(int64(val))
	}
}

func (g *gossipCounter) IncrCounter(key []string, val float32) {
	g.IncrCounterWithLabels(key, val, nil)
}

// countGossip installs a gossipCounter as go-metrics' global sink.
func countGossip() (*gossipCounter, error) {
	g := &gossipCounter{}
	_, err := metrics.NewGlobal(&metrics.Config{FilterDefault: true, TimerGranularity: time.Millisecond}, g)
	return g, err
}

// raiseFiles lifts the process's descriptor limit to want (the process
// runs as root in make scale; without the privilege it keeps its limit).
func raiseFiles(want uint64) uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	if l.Cur >= want {
		return l.Cur
	}
	n := syscall.Rlimit{Cur: want, Max: max(want, l.Max)}
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &n) != nil {
		n = syscall.Rlimit{Cur: l.Max, Max: l.Max}
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &n)
	}
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	return l.Cur
}

// profileCPU writes the host process's CPU profile for its first minute
// (the mesh forming) to dir/host-<first>.pprof, when
// WIZARD_SCALE_CPUPROFILE names dir; stop ends it earlier.
func profileCPU(dir string, first int) (stop func(), err error) {
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("host-%03d.pprof", first)))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
		})
	}
	time.AfterFunc(time.Minute, stop)
	return stop, nil
}

// cpuTime is the process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// logger logs node id's warnings and errors to stderr when
// WIZARD_SCALE_LOG is set, else nowhere: a crash makes every member warn.
func logger(id string) *slog.Logger {
	level := slog.LevelWarn
	switch os.Getenv("WIZARD_SCALE_LOG") {
	case "":
		return slog.New(slog.DiscardHandler)
	case "debug":
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("at", id)
}

// startNode starts a wizard node with TCP and swim gossip on loopback.
func startNode(id, seed string, p swim.Preset) (*runtime.Node, *swim.Discovery, error) {
	opts := []swim.Option{swim.WithBindAddr("127.0.0.1:0"), swim.WithPreset(p), swim.WithLogger(logger(id))}
	if seed != "" {
		opts = append(opts, swim.WithSeeds(seed))
	}
	if os.Getenv("WIZARD_SCALE_COMPRESS") == "1" {
		// memberlist's LZW compression of gossip, which the presets turn
		// off: its cost beside the mesh's other work, measured by turning
		// it back on.
		opts = append(opts, swim.WithMemberlistConfig(func(c *memberlist.Config) { c.EnableCompression = true }))
	}
	d, err := swim.New(opts...)
	if err != nil {
		return nil, nil, err
	}
	tr, err := tcp.New()
	if err != nil {
		return nil, nil, err
	}
	n, err := runtime.New(runtime.WithID(id), runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"), runtime.WithDiscovery(d), runtime.WithLogger(logger(id)))
	if err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", id, err)
	}
	return n, d, nil
}

// serve adds member id's patterns from..to-1 to n.
func serve(n *runtime.Node, id string, from, to int) error {
	h := func(context.Context, runtime.Request) (any, error) { return nil, nil }
	for i := from; i < to; i++ {
		if err := n.Add(patternOf(id, i), h); err != nil {
			return err
		}
	}
	return nil
}

// routesTo says whether n routes pattern to the peer id (connected or
// not, but not declared down).
func routesTo(n *runtime.Node, pattern, id string) bool {
	r, ok, err := n.Route(pattern)
	if err != nil || !ok {
		return false
	}
	return slices.ContainsFunc(r.Targets, func(t introspect.TargetState) bool { return t.ID == id && !t.Down })
}

// hasMember says whether n's members include id (not declared down).
func hasMember(n *runtime.Node, id string) bool {
	return slices.ContainsFunc(n.Members(), func(m introspect.Member) bool { return m.ID == id })
}

// out writes one JSON line to stdout, the parent's channel.
type out struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (o *out) send(v any) {
	b, _ := json.Marshal(v)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.w.Write(b)
	o.w.WriteByte('\n')
	o.w.Flush()
}

// writeHeapProfile writes the heap profile (as of the last GC) to name.
func writeHeapProfile(name string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// hostMsg is a host's answer to a command.
type hostMsg struct {
	Seed    string   `json:",omitempty"` // the first member's gossip address (host 0)
	Gossip  []string `json:",omitempty"` // every member's gossip address, when started
	Done    string   `json:",omitempty"` // the command answered
	At      int64    `json:",omitempty"` // Unix ns when the condition held on every member
	Heap    uint64   `json:",omitempty"` // live heap after a GC, bytes
	UDP     int64    `json:",omitempty"` // gossip bytes sent in the window
	TCP     int64    `json:",omitempty"`
	CPU     int64    `json:",omitempty"` // process CPU ns in the window
	Window  int64    `json:",omitempty"` // the window, ns
	Files   uint64   `json:",omitempty"` // the descriptor limit
	Members int      `json:",omitempty"`
	Left    int      `json:",omitempty"` // members the condition did not hold on within the wait
	Err     string   `json:",omitempty"`
}

// runHost runs a host process: it starts its members, then answers the
// parent's commands, one a line on stdin, until stdin closes.
func runHost(spec hostSpec) error {
	o := &out{w: bufio.NewWriter(os.Stdout)}
	profiles := os.Getenv("WIZARD_SCALE_HEAPPROFILE")
	if profiles != "" {
		goruntime.MemProfileRate = 4096 // finer than the default 512 KiB, for a heap of a few MB per member
	}
	heaps := 0
	files := raiseFiles(1 << 20)
	if dir := os.Getenv("WIZARD_SCALE_CPUPROFILE"); dir != "" {
		stop, err := profileCPU(dir, spec.First)
		if err != nil {
			return err
		}
		defer stop()
	}
	g, err := countGossip()
	if err != nil {
		return err
	}
	p := preset(spec.Preset)
	type mem struct {
		id string
		n  *runtime.Node
		d  *swim.Discovery
	}
	var ms []mem
	seed := spec.Seed
	for i := spec.First; i < spec.First+spec.Count; i++ {
		id := memberID(i)
		n, d, err := startNode(id, seed, p)
		if err != nil {
			return err
		}
		if err := serve(n, id, 0, 1); err != nil {
			return err
		}
		if seed == "" {
			seed = d.GossipAddr()
			o.send(hostMsg{Seed: seed})
		}
		ms = append(ms, mem{id, n, d})
	}
	var addrs []string
	for _, m := range ms {
		addrs = append(addrs, m.d.GossipAddr())
	}
	o.send(hostMsg{Gossip: addrs, Files: files, Members: len(ms)})

	// every waits until cond(member, other) holds for every member of
	// this host and every id of others (done pairs are not asked again),
	// polling every interval, and returns when.
	every := func(others []string, interval time.Duration, cond func(n *runtime.Node, other string) bool) (int64, int) {
		next := make([]int, len(ms))
		deadline := time.Now().Add(spec.Wait)
		for {
			left := 0
			for i, m := range ms {
				for next[i] < len(others) {
					o := others[next[i]]
					if o == m.id || cond(m.n, o) {
						if os.Getenv("WIZARD_SCALE_DEBUG") != "" {
							fmt.Fprintln(os.Stderr, "DEBUG", time.Now().Format("15:04:05.000"), m.id, "sees", o)
						}
						next[i]++
						continue
					}
					break
				}
				if next[i] < len(others) {
					left++
				}
			}
			if left == 0 {
				return time.Now().UnixNano(), 0
			}
			if time.Now().After(deadline) {
				// Say what is missing, for the log, and give up.
				shown := 0
				for i, m := range ms {
					if next[i] >= len(others) || shown >= 10 {
						continue
					}
					shown++
					o := others[next[i]]
					for _, x := range m.n.Members() {
						if x.ID == o {
							fmt.Fprintf(os.Stderr, "meshscale: after %v %s still waits for %s: %+v\n", spec.Wait, m.id, o, x)
						}
					}
				}
				return time.Now().UnixNano(), left
			}
			time.Sleep(interval) // a polling interval, not synchronisation
		}
	}
	all := make([]string, spec.Size)
	for i := range all {
		all[i] = memberID(i)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "base": // every member routes every host member's first pattern
			at, left := every(all, 50*time.Millisecond, func(n *runtime.Node, id string) bool { return routesTo(n, patternOf(id, 0), id) })
			o.send(hostMsg{Done: f[0], At: at, Left: left})
		case "grow": // every member serves its other patterns
			for _, m := range ms {
				if err := serve(m.n, m.id, 1, spec.Patterns); err != nil {
					return err
				}
			}
			o.send(hostMsg{Done: f[0], At: time.Now().UnixNano()})
		case "grown": // every member routes every host member's last pattern
			last := spec.Patterns - 1
			at, left := every(all, 50*time.Millisecond, func(n *runtime.Node, id string) bool { return routesTo(n, patternOf(id, last), id) })
			o.send(hostMsg{Done: f[0], At: at, Left: left})
		case "heap":
			goruntime.GC()
			goruntime.GC()
			var st goruntime.MemStats
			goruntime.ReadMemStats(&st)
			if profiles != "" {
				name := filepath.Join(profiles, fmt.Sprintf("heap-n%d-host%d-%d.pprof", spec.Size, spec.First, heaps))
				if err := writeHeapProfile(name); err != nil {
					return err
				}
			}
			heaps++
			o.send(hostMsg{Done: f[0], Heap: st.HeapAlloc})
		case "rest": // f[1]: the window
			w, err := time.ParseDuration(f[1])
			if err != nil {
				return err
			}
			u0, t0, c0, s := g.udp.Load(), g.tcp.Load(), cpuTime(), time.Now()
			time.Sleep(w) // the measuring window
			o.send(hostMsg{Done: f[0], UDP: g.udp.Load() - u0, TCP: g.tcp.Load() - t0, CPU: int64(cpuTime() - c0), Window: int64(time.Since(s)), Members: len(ms)})
		case "joined": // f[1]: the probe's id; f[2]: its pattern count
			id, k := f[1], f[2]
			var last int
			fmt.Sscan(k, &last)
			at, left := every([]string{id}, 10*time.Millisecond, func(n *runtime.Node, id string) bool {
				return routesTo(n, patternOf(id, 0), id) && routesTo(n, patternOf(id, last-1), id)
			})
			o.send(hostMsg{Done: f[0], At: at, Left: left})
		case "unrouted": // f[1]: the probe's id, crashed
			id := f[1]
			at, left := every([]string{id}, 10*time.Millisecond, func(n *runtime.Node, id string) bool { return !routesTo(n, patternOf(id, 0), id) })
			o.send(hostMsg{Done: f[0], At: at, Left: left})
		case "dead": // f[1]: the probe's id, crashed: out of every member's membership (gossip declared it dead)
			id := f[1]
			at, left := every([]string{id}, 50*time.Millisecond, func(n *runtime.Node, id string) bool { return !hasMember(n, id) })
			o.send(hostMsg{Done: f[0], At: at, Left: left})
		default:
			o.send(hostMsg{Err: "unknown command " + f[0]})
		}
	}
	return nil
}

// runProbe runs a probe process: a member that joins, serves its
// patterns and waits to be killed (its sockets closed without leaving).
func runProbe(spec probeSpec) error {
	o := &out{w: bufio.NewWriter(os.Stdout)}
	start := time.Now()
	n, _, err := startNode(spec.ID, spec.Seed, preset(spec.Preset))
	if err != nil {
		return err
	}
	if err := serve(n, spec.ID, 0, spec.Patterns); err != nil {
		return err
	}
	o.send(hostMsg{Done: "started", At: start.UnixNano()})
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the parent kills the process or closes stdin
	return nil
}
