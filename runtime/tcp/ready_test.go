package tcp_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
)

// runCounter counts the runs of role:work calls by id.
type runCounter struct {
	mu   sync.Mutex
	runs map[string]int
}

// serve starts a node on addr serving role:work, which answers its id and
// counts its runs.
func (c *runCounter) serve(t *testing.T, addr string) *runtime.Node {
	t.Helper()
	srv := newServer(t, runtime.WithListen(addr))
	transporttest.MustAdd(t, srv, "role:work", func(ctx context.Context, r runtime.Request) (any, error) {
		id := r.Get("id").(string)
		c.mu.Lock()
		c.runs[id]++
		c.mu.Unlock()
		return id, nil
	})
	return srv
}

func (c *runCounter) get(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[id]
}

// work calls role:work with id from cl with opts, within 20s; the error
// also says when the answer is not id.
func work(cl *runtime.Node, id string, opts ...runtime.CallOption) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cl.Act(ctx, "role:work", map[string]any{"id": id}, opts...)
	if err == nil && res.Value() != id {
		err = fmt.Errorf("answered %v", res.Value())
	}
	return err
}

// TestWaitForReadyServerRestart: while the only server of a pattern is
// down, a call without WaitForReady fails at once as unavailable, and
// calls with it, idempotent or not, wait (the node counts them in
// ReadyWaits); when a server starts again on the same address, every
// waiting call succeeds and ran exactly once, and a waiting call whose
// deadline ends first fails with the deadline's code.
func TestWaitForReadyServerRestart(t *testing.T) {
	rc := &runCounter{runs: map[string]int{}}
	first := rc.serve(t, "127.0.0.1:0")
	addr := first.Addr()
	cl := newClient(t, "role:work", addr)
	if err := work(cl, "before"); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the client routes role:work nowhere", func() bool { return !transporttest.Routes(cl, "role:work") })

	err := work(cl, "fails", runtime.Idempotent())
	transporttest.WantCode(t, err, runtime.CodeUnavailable)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	_, err = cl.Act(ctx, "role:work", map[string]any{"id": "expires"}, runtime.Idempotent(), runtime.WaitForReady())
	cancel()
	transporttest.WantCode(t, err, runtime.CodeDeadlineExceeded)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a wait past its deadline: %v; want an error that matches context.DeadlineExceeded", err)
	}

	const calls = 8
	waits0 := cl.Stats().ReadyWaits
	errs := make(chan error, calls)
	for i := range calls {
		opts := []runtime.CallOption{runtime.WaitForReady()}
		if i%2 == 0 {
			opts = append(opts, runtime.Idempotent())
		}
		go func() { errs <- work(cl, fmt.Sprint(i), opts...) }()
	}
	testwait.Until(t, "every call waits", func() bool { return cl.Stats().ReadyWaits-waits0 == calls })
	rc.serve(t, addr)
	for range calls {
		if err := testwait.Recv(t, errs); err != nil {
			t.Errorf("a call that waited: %v; want its answer", err)
		}
	}
	for i := range calls {
		if n := rc.get(fmt.Sprint(i)); n != 1 {
			t.Errorf("call %d ran %d times, want once", i, n)
		}
	}
	for _, id := range []string{"fails", "expires"} {
		if n := rc.get(id); n != 0 {
			t.Errorf("call %s, which failed, ran %d times", id, n)
		}
	}
}

// TestWaitForReadyRestartUnderLoad: callers make idempotent calls that
// wait for ready, and others that do not, while the server stops
// (gracefully) and starts again on the same address. Every idempotent
// call succeeds; no other call runs twice, and one that failed failed as
// unavailable.
func TestWaitForReadyRestartUnderLoad(t *testing.T) {
	const callers, perCaller = 4, 40
	rc := &runCounter{runs: map[string]int{}}
	first := rc.serve(t, "127.0.0.1:0")
	addr := first.Addr()
	cl := newClient(t, "role:work", addr)
	idempotent := func(i int) bool { return i%2 == 0 }
	type outcome struct {
		id  string
		i   int
		err error
	}
	var done atomic.Int32
	restart := make(chan struct{})
	outcomes := make(chan outcome, callers*perCaller)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range perCaller {
				id := fmt.Sprintf("%d/%d", c, i)
				var opts []runtime.CallOption
				if idempotent(i) {
					opts = append(opts, runtime.Idempotent(), runtime.WaitForReady())
				}
				outcomes <- outcome{id, i, work(cl, id, opts...)}
				if done.Add(1) == callers*perCaller/3 {
					close(restart)
				}
			}
		})
	}
	testwait.Recv(t, restart)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	rc.serve(t, addr)
	wg.Wait()
	close(outcomes)
	var failed int
	for o := range outcomes {
		n := rc.get(o.id)
		switch {
		case idempotent(o.i):
			if o.err != nil || n == 0 {
				t.Errorf("idempotent call %s: %v, ran %d times; want success", o.id, o.err, n)
			}
		case n > 1:
			t.Errorf("call %s ran %d times", o.id, n)
		case o.err == nil && n != 1:
			t.Errorf("call %s succeeded and ran %d times", o.id, n)
		case o.err != nil && !errors.Is(o.err, runtime.ErrUnavailable):
			t.Errorf("call %s: %v; want success or unavailable", o.id, o.err)
		}
		if o.err != nil {
			failed++
		}
	}
	t.Logf("%d of %d calls failed, none of them idempotent; ready waits %d, retries %d", failed, callers*perCaller, cl.Stats().ReadyWaits, cl.Stats().Retries)
}
