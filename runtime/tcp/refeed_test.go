package tcp_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/link"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
)

// TestRefeedRunsOnce: the connection is cut while non-idempotent calls
// run on the server; the caller sends them again, same ids, once it is
// connected again, and every call runs exactly once and gets its answer.
func TestRefeedRunsOnce(t *testing.T) {
	const calls = 8
	release := transporttest.NewGate(t)
	var (
		started sync.WaitGroup
		mu      sync.Mutex
		runs    = map[string]int{}
	)
	started.Add(calls)
	srv := newServer(t)
	transporttest.MustAdd(t, srv, "role:pay", func(ctx context.Context, r runtime.Request) (any, error) {
		id := r.Get("id").(string)
		mu.Lock()
		runs[id]++
		first := runs[id] == 1
		mu.Unlock()
		if first {
			started.Done()
		}
		select {
		case <-release.C():
		case <-ctx.Done():
			// The cut must not cancel it: the call sent again joins it.
			return nil, fmt.Errorf("call %s cancelled: %w", id, ctx.Err())
		}
		return "paid " + id, nil
	})
	proxy := link.NewTCP(t, srv.Addr())
	cl := newClient(t, "role:pay", proxy.Addr())

	type answer struct {
		id  string
		v   any
		err error
	}
	answers := make(chan answer, calls)
	for i := range calls {
		id := fmt.Sprint(i)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res, err := cl.Act(ctx, "role:pay", map[string]any{"id": id})
			answers <- answer{id, res.Value(), err}
		}()
	}
	started.Wait() // every call runs on the server
	proxy.Cut()
	// Every call arrives again and joins its running handler, which the
	// cut did not cancel.
	testwait.Until(t, "every call is sent again", func() bool { return srv.Stats().Duplicates == calls })
	release.Open()
	for range calls {
		a := <-answers
		if a.err != nil || a.v != "paid "+a.id {
			t.Errorf("call %s: %v, %v; want its answer", a.id, a.v, a.err)
		}
	}
	if got := cl.Stats().Refeeds; got != calls {
		t.Errorf("%d calls sent again, want %d", got, calls)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range runs {
		if n != 1 {
			t.Errorf("call %s ran %d times", id, n)
		}
	}
}

// TestRefeedWithoutDedupRunsAgain: with de-duplication off, the same cut
// runs a refed call again, which is what the table prevents.
func TestRefeedWithoutDedupRunsAgain(t *testing.T) {
	release := transporttest.NewGate(t)
	var runs atomic.Int32
	started := make(chan struct{}, 2)
	srv := newServer(t, runtime.WithoutDedup())
	transporttest.MustAdd(t, srv, "role:pay", func(ctx context.Context, r runtime.Request) (any, error) {
		runs.Add(1)
		started <- struct{}{}
		<-release.C()
		return "paid", nil
	})
	proxy := link.NewTCP(t, srv.Addr())
	cl := newClient(t, "role:pay", proxy.Addr())
	done := payAsync(cl)
	<-started
	proxy.Cut()
	<-started // the refed call runs again
	release.Open()
	if err := <-done; err != nil {
		t.Errorf("call: %v", err)
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("ran %d times, want 2 without de-duplication", n)
	}
}

// TestNoRefeedToAnotherRun: when the address of a cut connection leads to
// another run of the node (a restart), the call is not sent there — it
// would run a second time — and the caller learns it may have run.
func TestNoRefeedToAnotherRun(t *testing.T) {
	release := transporttest.NewGate(t)
	defer release.Open() // before the nodes close
	started := make(chan struct{}, 1)
	first := newServer(t)
	transporttest.MustAdd(t, first, "role:pay", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-release.C()
		return "paid", nil
	})
	var secondRuns atomic.Int32
	second := newServer(t)
	transporttest.MustAdd(t, second, "role:pay", func(ctx context.Context, r runtime.Request) (any, error) {
		secondRuns.Add(1)
		return "paid again", nil
	})
	proxy := link.NewTCP(t, first.Addr())
	cl := newClient(t, "role:pay", proxy.Addr())
	done := payAsync(cl)
	<-started
	proxy.Retarget(second.Addr())
	proxy.Cut()
	err := <-done
	transporttest.WantCode(t, err, runtime.CodeUnavailable)
	if n := secondRuns.Load(); n != 0 {
		t.Errorf("the other run ran the call %d times", n)
	}
}

// payAsync calls role:pay from cl in the background; the channel gets the
// call's error.
func payAsync(cl *runtime.Node) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := cl.ActE(ctx, "role:pay", nil)
		done <- err
	}()
	return done
}

// TestCancelledCallNotCalledLost: a call its caller cancels while the
// handler runs ends canceled, and its error does not say the connection
// was lost.
func TestCancelledCallNotCalledLost(t *testing.T) {
	started := make(chan struct{}, 1)
	srv := newServer(t)
	transporttest.MustAdd(t, srv, "role:slow", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	cl := newClient(t, "role:slow", srv.Addr())
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-started
		cancel()
	}()
	_, err := cl.ActE(ctx, "role:slow", nil)
	transporttest.WantCode(t, err, runtime.CodeCanceled)
	if strings.Contains(err.Error(), "come back") {
		t.Errorf("a cancelled call reads as lost: %v", err)
	}
}
