package evbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// envChild names the environment variable that makes the running binary
// one of the events mode's processes: it holds a JSON spec.
const envChild = "WIZARD_BENCH_EVENTS"

// The roles of a process.
const (
	roleBroker = "broker" // a nats-server (JetStream on): prints its URL
	roleSub    = "sub"    // a member of a group: prints its address
	roleEmit   = "emit"   // the emitter: prints "ready" once every group is known
)

// spec tells a child what to play.
type spec struct {
	Contender string   `json:"contender"`
	Role      string   `json:"role"`
	Group     string   `json:"group,omitempty"`  // a sub's
	Member    int      `json:"member,omitempty"` // a sub's index in its group
	Groups    []string `json:"groups,omitempty"` // the emitter's
	Peers     []string `json:"peers,omitempty"`  // the emitter's: the subs' addresses
	Broker    string   `json:"broker,omitempty"` // a NATS URL
	StoreDir  string   `json:"store,omitempty"`  // the broker's JetStream storage
	// Profile, when set, is the path of a CPU profile of the process;
	// an allocation profile goes beside it (-allocs.pprof).
	Profile string `json:"profile,omitempty"`
}

// ServeIfChild plays the child's role and exits when the process was
// started as one of the events mode's processes; otherwise it returns at
// once. Call it first in main and in TestMain.
func ServeIfChild() {
	js := os.Getenv(envChild)
	if js == "" {
		return
	}
	var s spec
	err := json.Unmarshal([]byte(js), &s)
	if err == nil {
		err = play(s, os.Stdin, os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "events %s %s (%s): %v\n", s.Role, s.Contender, s.Group, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// The queries of the control protocol, and what they answer.
const (
	qSnap    = "snap"    // sub: "N i:c,..." since the last snap
	qTotal   = "total"   // sub: the events handled since it started
	qMallocs = "mallocs" // any Go child: runtime.MemStats.Mallocs
	qStart   = "start "  // emitter: "start N" starts N loops; "ok"
	qStop    = "stop"    // emitter: stops them; "EMITTED ERRORS FIRSTERR"
)

func play(s spec, in io.Reader, out io.Writer) error {
	if s.Profile != "" {
		stop, err := profile(s.Profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if s.Role == roleBroker {
		url, stop, err := startBroker(s.StoreDir)
		if err != nil {
			return err
		}
		defer stop()
		return answer(in, out, url, nil)
	}
	c, err := goContenderOf(s.Contender)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	switch s.Role {
	case roleSub:
		var rec recorder
		addr, closeFn, err := c.subscribe(ctx, s, &rec)
		if err != nil {
			return err
		}
		defer closeFn()
		return answer(in, out, addr, func(q string) (string, bool) {
			switch q {
			case qSnap:
				return rec.snap(), true
			case qTotal:
				return strconv.FormatUint(rec.total.Load(), 10), true
			}
			return "", false
		})
	case roleEmit:
		emit, closeFn, err := c.emitter(ctx, s)
		if err != nil {
			return err
		}
		defer closeFn()
		var e emitLoops
		defer e.stop()
		return answer(in, out, "ready", func(q string) (string, bool) {
			if n, ok := strings.CutPrefix(q, qStart); ok {
				k, err := strconv.Atoi(n)
				if err != nil || k < 1 {
					return "bad " + q, true
				}
				e.start(k, emit)
				return "ok", true
			}
			if q == qStop {
				return e.stop(), true
			}
			return "", false
		})
	}
	return fmt.Errorf("unknown role %q", s.Role)
}

// answer prints first, then answers each query line of in: by ask, or
// the common ones; it returns at EOF.
func answer(in io.Reader, out io.Writer, first string, ask func(string) (string, bool)) error {
	if _, err := fmt.Fprintln(out, first); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		q := strings.TrimSpace(sc.Text())
		a, ok := "", false
		if ask != nil {
			a, ok = ask(q)
		}
		if !ok && q == qMallocs {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			a, ok = strconv.FormatUint(m.Mallocs, 10), true
		}
		if !ok {
			a = "unknown query " + q
		}
		if _, err := fmt.Fprintln(out, a); err != nil {
			return err
		}
	}
	return sc.Err()
}

// emitLoops runs the emitter's concurrent loops of emit.
type emitLoops struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	emitted  atomic.Int64
	errs     atomic.Int64
	firstErr atomic.Pointer[string]
}

func (e *emitLoops) start(n int, emit func(context.Context) error) {
	e.stop()
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	for range n {
		e.wg.Go(func() {
			for ctx.Err() == nil {
				if err := emit(ctx); err != nil {
					if ctx.Err() != nil {
						return // stopped mid-emit: neither emitted nor failed
					}
					e.errs.Add(1)
					msg := err.Error()
					e.firstErr.CompareAndSwap(nil, &msg)
					continue
				}
				e.emitted.Add(1)
			}
		})
	}
}

// stop ends the loops and returns "EMITTED ERRORS FIRSTERR" since start.
func (e *emitLoops) stop() string {
	if e.cancel == nil {
		return "0 0"
	}
	e.cancel()
	e.wg.Wait()
	e.cancel = nil
	line := fmt.Sprintf("%d %d", e.emitted.Swap(0), e.errs.Swap(0))
	if p := e.firstErr.Swap(nil); p != nil {
		line += " " + strings.ReplaceAll(*p, "\n", " ")
	}
	return line
}

// profile starts a CPU profile into path and returns what stops it and
// writes the allocation profile beside it.
func profile(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		a, err := os.Create(strings.TrimSuffix(path, ".pprof") + "-allocs.pprof")
		if err == nil {
			err = errors.Join(pprof.Lookup("allocs").WriteTo(a, 0), a.Close())
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "allocation profile:", err)
		}
	}, nil
}
