//go:build linux

package faults_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/lb"
	"github.com/wizardmesh/wizard/runtime/pattern"
	"github.com/wizardmesh/wizard/runtime/swim"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// The node processes: the test binary re-executed inside a host's
// namespace (TestMain), its role and configuration in roleEnv. Each is a
// real wizard node with default options, except what a non-loopback
// address needs: plain TCP (tcp.WithInsecure) on the listener and keyless
// gossip (swim.WithInsecure), which refuse such an address without them.

// roleEnv holds the JSON of a nodeSpec in a node process.
const roleEnv = "WIZARD_FAULT_NODE"

// The patterns the servers serve: once is not idempotent (each key must
// run once), idem is and is called with runtime.Idempotent.
const (
	oncePattern = "role:fault,cmd:once"
	idemPattern = "role:fault,cmd:idem"
)

// Ports on every host.
const (
	transportPort = 7000
	gossipPort    = 7946
)

// bucket is the width of the caller's time buckets.
const bucket = 100 * time.Millisecond

// nodeSpec is what a node process is to be.
type nodeSpec struct {
	Role    string   // "server" or "caller"
	ID      string   // node id
	IP      string   // the host's address
	Dir     string   // where it writes its files
	Static  []string // caller with StaticPeers: the servers' transport addresses
	Gossip  bool     // discovery by runtime/swim
	Seeds   []string // gossip seeds
	Fast    bool     // swim.Fast instead of the default swim.LAN
	Workers int      // caller: workers per kind of call
	Servers int      // caller: servers to see before it reports ready
}

// event is a line a node process prints on its standard output.
type event struct {
	Ready bool `json:",omitempty"`
	// View: the ids of the members this node sees (itself included, not
	// suspects), sorted, when it changed (gossip only).
	View    []string `json:",omitempty"`
	Suspect []string `json:",omitempty"`
	At      int64    `json:",omitempty"` // unix nanoseconds
	// Bucket: the caller's counts of one bucket, when it ends.
	Bucket *bucketCounts `json:",omitempty"`
}

// bucketCounts are a caller's calls that ended in one bucket (failures
// also by the bucket they started in).
type bucketCounts struct {
	I           int            // index from the caller's start
	OK          [2]int         // by kind: idem, once
	Failed      [2]int         // by kind, by end
	FailedStart [2]int         // by kind, by start
	By          map[string]int // ok calls by the server that answered
}

// callerReport is what the caller writes at exit.
type callerReport struct {
	Start   int64 // unix nanoseconds of bucket 0
	Buckets []bucketCounts
	Errors  [2]map[string]int // by kind, by code
	OKKeys  []string          // once calls answered ok
	// Failures describes the first failed calls (when, how long, the
	// error), for a missed target's log.
	Failures []string
}

// serverReport is what a server writes at exit (not after kill -9).
type serverReport struct {
	Idem, Once int64 // executions
}

// Kinds of calls.
const (
	idem = 0
	once = 1
)

var kindNames = [2]string{"idempotent", "non-idempotent"}

// runNode runs the node process spec describes until SIGTERM.
func runNode(spec nodeSpec) error {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	out := &printer{w: bufio.NewWriter(os.Stdout)}
	n, err := newNode(spec)
	if err != nil {
		return err
	}
	var stopLoad func()
	var rep func() error
	switch spec.Role {
	case "server":
		rep, err = serve(n, spec, out)
	case "caller":
		stopLoad, rep, err = call(n, spec, out)
	default:
		err = fmt.Errorf("role %q", spec.Role)
	}
	if err != nil {
		n.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if spec.Gossip {
		go watchView(ctx, n, out)
	}
	<-stop
	if stopLoad != nil {
		stopLoad() // before the node shuts down, which would fail calls
	}
	cancel()
	shut, cancelShut := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelShut()
	n.Shutdown(shut)
	return rep()
}

// newNode makes the node: default options, but plain TCP and keyless
// gossip on a non-loopback address, which need their Insecure options.
func newNode(spec nodeSpec) (*runtime.Node, error) {
	tr, err := tcp.New(tcp.WithInsecure())
	if err != nil {
		return nil, err
	}
	opts := []runtime.Option{runtime.WithID(spec.ID), runtime.WithTransport(tr)}
	if spec.Role == "server" || spec.Gossip {
		opts = append(opts, runtime.WithListen(fmt.Sprintf("%s:%d", spec.IP, transportPort)))
	}
	if len(spec.Static) > 0 {
		opts = append(opts, runtime.WithDiscovery(runtime.StaticPeers(spec.Static...)))
	}
	if spec.Gossip {
		sopts := []swim.Option{
			swim.WithBindAddr(fmt.Sprintf("%s:%d", spec.IP, gossipPort)),
			swim.WithSeeds(spec.Seeds...),
			swim.WithInsecure(),
		}
		if spec.Fast {
			sopts = append(sopts, swim.WithPreset(swim.Fast))
		}
		d, err := swim.New(sopts...)
		if err != nil {
			return nil, err
		}
		opts = append(opts, runtime.WithDiscovery(d))
	}
	opts, err = withBalancer(opts)
	if err != nil {
		return nil, err
	}
	return runtime.New(opts...)
}

// balancerEnv picks another balancer than the default, to compare them
// under the same faults: "ring" (the MicroWizard ring, the default before
// issue 12), "ring+breakers" (with runtime/lb's failsafe-go breakers).
const balancerEnv = "WIZARD_FAULT_BALANCER"

// withBalancer adds the options balancerEnv asks for.
func withBalancer(opts []runtime.Option) ([]runtime.Option, error) {
	ring := runtime.WithBalancer(func(pattern.Pattern) runtime.Balancer { return lb.NewRing[*runtime.Target]() })
	switch v := os.Getenv(balancerEnv); v {
	case "":
		return opts, nil
	case "ring":
		return append(opts, ring), nil
	case "ring+breakers":
		bs, err := lb.NewBreakers[*runtime.Target]()
		if err != nil {
			return nil, err
		}
		return append(opts, ring, runtime.WithBreakers(func(t *runtime.Target) runtime.Breaker { return bs.Get(t) })), nil
	default:
		return nil, fmt.Errorf("%s=%q: want ring or ring+breakers (or unset: the default)", balancerEnv, v)
	}
}

// printer writes events as JSON lines, one at a time.
type printer struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (p *printer) print(e event) {
	b, _ := json.Marshal(e)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.w.Write(append(b, '\n'))
	p.w.Flush()
}

// serve adds the two handlers. once appends each key it runs to
// exec-<id>.log as it goes (a write per call, so a kill -9 loses none);
// the counts go to server-<id>-<pid>.json at exit.
func serve(n *runtime.Node, spec nodeSpec, out *printer) (report func() error, err error) {
	log, err := os.OpenFile(filepath.Join(spec.Dir, "exec-"+spec.ID+".log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	var idemRuns, onceRuns atomic.Int64
	reply := map[string]any{"by": spec.ID}
	err = errors.Join(
		n.Add(oncePattern, func(ctx context.Context, r runtime.Request) (any, error) {
			key, _ := r.Get("key").(string)
			onceRuns.Add(1)
			if _, err := log.WriteString(key + "\n"); err != nil {
				return nil, err
			}
			return reply, nil
		}),
		n.Add(idemPattern, func(ctx context.Context, r runtime.Request) (any, error) {
			idemRuns.Add(1)
			return reply, nil
		}),
	)
	if err != nil {
		return nil, err
	}
	out.print(event{Ready: true})
	return func() error {
		log.Close()
		return writeJSON(filepath.Join(spec.Dir, fmt.Sprintf("server-%s-%d.json", spec.ID, os.Getpid())), serverReport{Idem: idemRuns.Load(), Once: onceRuns.Load()})
	}, nil
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// watchView prints this node's view of the members whenever it changes.
func watchView(ctx context.Context, n *runtime.Node, out *printer) {
	var last, lastSuspect []string
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var view, suspect []string
		for _, m := range n.Members() {
			switch {
			case m.ID == "":
			case m.Suspect:
				suspect = append(suspect, m.ID)
			default:
				view = append(view, m.ID)
			}
		}
		slices.Sort(view)
		slices.Sort(suspect)
		if !slices.Equal(view, last) || !slices.Equal(suspect, lastSuspect) {
			out.print(event{View: view, Suspect: suspect, At: time.Now().UnixNano()})
			last, lastSuspect = view, suspect
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
