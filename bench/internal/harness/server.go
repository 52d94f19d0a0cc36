package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"time"
)

// envServer names the environment variable that turns the running binary
// into a server process: it holds a JSON ServerSpec.
const envServer = "WIZARD_BENCH_SERVER"

// The roles a server process plays.
const (
	RoleAdd     = "add"     // answers a + b at once
	RoleSleep   = "sleep"   // the article's service B: answers after Delay
	RoleForward = "forward" // the article's service A: asks Upstreams and passes the answer on
)

// The control protocol on a server process's standard input and output:
// the parent writes a query line, the child answers one line. EOF on stdin
// stops the child.
const (
	queryServed  = "served"  // how many calls the handler has answered
	answerServed = "served " // followed by the count
)

// ServerSpec tells a child process what to serve.
type ServerSpec struct {
	Contender string        `json:"contender"`
	Role      string        `json:"role"`
	Listen    string        `json:"listen"`
	Delay     time.Duration `json:"delay,omitempty"`
	// Upstreams are the addresses a RoleForward server calls: one, or the
	// replicas its client balances over (see [Contender.DialCluster]).
	Upstreams  []string `json:"upstreams,omitempty"`
	CPUProfile string   `json:"cpuprofile,omitempty"`
	// MemProfileAll makes the process record every allocation in its
	// heap profile (runtime.MemProfileRate 1), for the "heap" query.
	MemProfileAll bool `json:"memprofileall,omitempty"`
}

// ServeIfChild serves and exits when the process was started as a server
// (see the package doc); otherwise it returns at once. Call it first in
// main and in TestMain.
func ServeIfChild() {
	spec := os.Getenv(envServer)
	if spec == "" {
		return
	}
	var s ServerSpec
	err := json.Unmarshal([]byte(spec), &s)
	if err == nil {
		err = serve(s, os.Stdin, os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench server %s: %v\n", spec, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serve runs s, writes the bound address and a newline to out, answers the
// queries of the control protocol read from in, and stops when in reaches
// EOF (the parent closed it, or died).
func serve(s ServerSpec, in io.Reader, out io.Writer) error {
	switch s.Role {
	case RoleEcho:
		return serveEcho(s, in, out)
	case RoleStream:
		return serveStream(s, in, out)
	}
	c, err := Lookup(s.Contender)
	if err != nil {
		return err
	}
	var h Handler
	var upstream Client
	switch s.Role {
	case RoleAdd:
		h = func(_ context.Context, a, b float64) (float64, error) { return a + b, nil }
	case RoleSleep:
		d := s.Delay
		h = func(ctx context.Context, a, b float64) (float64, error) {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				return a + b, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
	case RoleForward:
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		upstream, err = dialClusterChecked(ctx, c, s.Upstreams, DialOptions{})
		cancel()
		if err != nil {
			return fmt.Errorf("dial upstream: %w", err)
		}
		defer upstream.Close()
		h = upstream.Call
	default:
		return fmt.Errorf("unknown role %q", s.Role)
	}
	if s.CPUProfile != "" {
		f, err := os.Create(s.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	// The scenarios' servers count the calls they answer (the cluster
	// reports the spread over its replicas); the add role does not, so
	// the main comparison measures the bare handler.
	var served atomic.Uint64
	if s.Role != RoleAdd {
		inner := h
		h = func(ctx context.Context, a, b float64) (float64, error) {
			r, err := inner(ctx, a, b)
			if err == nil {
				served.Add(1)
			}
			return r, err
		}
	}
	srv, err := c.Serve(s.Listen, h, ServeOptions{Blocking: s.Role != RoleAdd})
	if err != nil {
		return err
	}
	defer srv.Close()
	if _, err := fmt.Fprintln(out, srv.Addr()); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		answer := "unknown query " + strings.TrimSpace(sc.Text())
		if strings.TrimSpace(sc.Text()) == queryServed {
			answer = answerServed + fmt.Sprint(served.Load())
		}
		if strings.TrimSpace(sc.Text()) == queryMem {
			answer = memAnswer()
		}
		if _, err := fmt.Fprintln(out, answer); err != nil {
			return err
		}
	}
	return sc.Err()
}

// dialChecked dials c at addr and makes one call to check the answer.
func dialChecked(ctx context.Context, c Contender, addr string, o DialOptions) (Client, error) {
	cl, err := c.Dial(ctx, addr, o)
	if err != nil {
		return nil, err
	}
	return firstCall(ctx, c, cl)
}

// firstCall makes one call over cl and checks the answer; on failure it
// closes cl.
func firstCall(ctx context.Context, c Contender, cl Client) (Client, error) {
	r, err := cl.Call(ctx, 1, 2)
	if err == nil && r != 3 {
		err = fmt.Errorf("1 + 2 answered %v", r)
	}
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("%s: first call: %w", c.Title, err)
	}
	return cl, nil
}
