//go:build linux

package podsim_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/wizardmesh/wizard/examples/services/mesh"
	"github.com/wizardmesh/wizard/runtime"
)

// callerSpec is what the caller pod is to be.
type callerSpec struct {
	IP      string   // the pod's address
	Dir     string   // where it writes caller.json
	Flags   []string // the mesh flags: gossip, DNS, key, TLS
	Workers int      // workers per kind of call
	Servers int      // server pods to route to before the load starts
}

// Kinds of calls.
const (
	idem = 0
	once = 1
)

var kindNames = [2]string{"idempotent", "non-idempotent"}

// workerRate is the calls per second each worker makes at most.
const workerRate = 100

// failure is one failed call, kept for the evidence.
type failure struct {
	Kind  int
	Key   string
	Began int64 // unix nanoseconds
	Ended int64
	Code  string
	Err   string
}

// maxFailures bounds the failures the caller keeps in full.
const maxFailures = 50

// callerReport is what the caller writes at exit.
type callerReport struct {
	Start  int64 // unix nanoseconds of the load's start
	OK     [2]int
	Failed [2]int
	Errors [2]map[string]int // by kind, by code
	OKKeys []string          // once calls answered ok
	// FirstOK and LastOK: unix nanoseconds of the first and last ok call
	// each pod answered (by the end of the call).
	FirstOK, LastOK map[string]int64
	Failures        []failure // the first maxFailures
}

// caller keeps the load and its counts.
type caller struct {
	n   *runtime.Node
	mu  sync.Mutex
	rep callerReport
}

// runCaller is the caller pod: a node in the mesh (no patterns of its
// own), which waits until it routes both patterns to spec.Servers pods,
// prints "ready", and calls until SIGTERM; then it writes caller.json.
// It prints "served POD" when POD first answers a call.
func runCaller(spec callerSpec) error {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	fs := flag.NewFlagSet("caller", flag.ContinueOnError)
	discovery := mesh.AddFlags(fs, "")
	if err := fs.Parse(spec.Flags); err != nil {
		return err
	}
	log := mesh.Logger()
	t, err := discovery.Transport("tcp", log)
	if err != nil {
		return err
	}
	o, err := discovery.Option(log)
	if err != nil {
		return err
	}
	n, err := runtime.New(runtime.WithID("caller"), runtime.WithTransport(t), runtime.WithListen(spec.IP+":7070"), runtime.WithLogger(log), o)
	if err != nil {
		return err
	}
	wait, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for serving(n) < spec.Servers {
		select {
		case <-wait.Done():
			n.Close()
			return fmt.Errorf("caller: %d of %d pods routed after a minute", serving(n), spec.Servers)
		case <-time.After(20 * time.Millisecond):
		}
	}
	c := &caller{n: n, rep: callerReport{
		Start: time.Now().UnixNano(), Errors: [2]map[string]int{{}, {}},
		FirstOK: map[string]int64{}, LastOK: map[string]int64{},
	}}
	ctx, stopLoad := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range spec.Workers {
		wg.Go(func() { c.work(ctx, idem, "") })
		prefix := fmt.Sprintf("caller-%d-", w)
		wg.Go(func() { c.work(ctx, once, prefix) })
	}
	fmt.Println("ready")
	<-stop
	stopLoad() // before the node shuts down, which would fail calls
	wg.Wait()
	shut, cancelShut := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelShut()
	n.Shutdown(shut)
	c.mu.Lock()
	defer c.mu.Unlock()
	b, err := json.Marshal(c.rep)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(spec.Dir, "caller.json"), b, 0o644)
}

// serving is the number of peers that serve both patterns.
func serving(n *runtime.Node) int {
	count := 0
	for _, m := range n.Members() {
		if !m.Self && m.Patterns >= 2 {
			count++
		}
	}
	return count
}

// work makes calls of one kind until ctx ends, one at a time, at most
// workerRate a second; once calls carry unique keys prefix+sequence.
func (c *caller) work(ctx context.Context, kind int, prefix string) {
	var opts []runtime.CallOption
	pattern := oncePattern
	if kind == idem {
		opts = append(opts, runtime.Idempotent())
		pattern = idemPattern
	}
	pace := time.NewTicker(time.Second / workerRate)
	defer pace.Stop()
	for seq := 0; ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-pace.C:
		}
		key := prefix + fmt.Sprint(seq)
		began := time.Now()
		res, err := c.n.Act(context.Background(), pattern, map[string]any{"key": key}, opts...)
		var reply struct {
			By string `json:"by"`
		}
		if err == nil {
			err = res.Decode(&reply)
		}
		c.record(kind, began, time.Now(), key, reply.By, err)
	}
}

// record counts one call.
func (c *caller) record(kind int, began, ended time.Time, key, by string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := &c.rep
	if err == nil {
		r.OK[kind]++
		if kind == once {
			r.OKKeys = append(r.OKKeys, key)
		}
		if _, ok := r.FirstOK[by]; !ok {
			r.FirstOK[by] = ended.UnixNano()
			fmt.Println("served", by) // the test waits for it as a scale-up's end
		}
		r.LastOK[by] = ended.UnixNano()
		return
	}
	r.Failed[kind]++
	code := errorCode(err)
	r.Errors[kind][code]++
	if len(r.Failures) < maxFailures {
		r.Failures = append(r.Failures, failure{Kind: kind, Key: key, Began: began.UnixNano(), Ended: ended.UnixNano(), Code: code, Err: err.Error()})
	}
}

// errorCode names an error by its wizard code, or its kind.
func errorCode(err error) string {
	var we *runtime.Error
	switch {
	case errors.As(err, &we):
		return we.Code.String()
	case errors.Is(err, context.DeadlineExceeded):
		return "context deadline"
	default:
		return fmt.Sprintf("%T", err)
	}
}
