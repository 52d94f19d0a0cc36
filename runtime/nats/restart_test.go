package nats_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/natstest"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
)

// TestBrokerRestartRefeedRunsOnce: the broker restarts while
// non-idempotent calls run on the server; the caller sends them again,
// same ids, once its broker connection is back, and every call runs
// exactly once and gets its answer, as over a cut TCP connection.
func TestBrokerRestartRefeedRunsOnce(t *testing.T) {
	const calls = 8
	b := natstest.Start(t)
	release := transporttest.NewGate(t)
	var (
		started sync.WaitGroup
		mu      sync.Mutex
		runs    = map[string]int{}
	)
	started.Add(calls)
	srv := transporttest.NewServer(t, newTransport(t, b.URL()))
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
			// The lost broker connection must not cancel it: the call
			// sent again joins it.
			return nil, fmt.Errorf("call %s cancelled: %w", id, ctx.Err())
		}
		return "paid " + id, nil
	})
	cl := transporttest.NewClient(t, newTransport(t, b.URL()), "role:pay", nil, srv.Addr())

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
	started.Wait()
	b.Stop()
	b.Restart()
	testwait.Until(t, "every call is sent again", func() bool { return srv.Stats().Duplicates == calls })
	release.Open()
	for range calls {
		a := testwait.Recv(t, answers)
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

// TestBrokerRestartUnderLoad: callers make idempotent and
// non-idempotent calls to two servers while the broker stops and starts
// again on the same port. Every idempotent call waits for ready
// ([runtime.WaitForReady]) and succeeds: the calls made while the broker
// is down (every target sits behind it) wait for a target to come back,
// and those lost in flight run again. No call that is not idempotent
// runs twice, and every one that succeeded ran exactly once; one that
// failed failed as unavailable, one that failed as not sent never ran,
// and one that waited for ready never fails as not sent. The
// non-idempotent calls in flight at the restart are covered by
// TestBrokerRestartRefeedRunsOnce.
func TestBrokerRestartUnderLoad(t *testing.T) {
	const callers, perCaller = 8, 60
	b := natstest.Start(t)
	var mu sync.Mutex
	runs := map[string]int{}
	var servers []string
	for range 2 {
		srv := transporttest.NewServer(t, newTransport(t, b.URL()))
		transporttest.MustAdd(t, srv, "role:work", func(ctx context.Context, r runtime.Request) (any, error) {
			id := r.Get("id").(string)
			time.Sleep(200 * time.Microsecond) // work, so that calls overlap the restart; not synchronisation
			mu.Lock()
			runs[id]++
			mu.Unlock()
			return id, nil
		})
		servers = append(servers, srv.Addr())
	}
	cl := transporttest.NewClient(t, newTransport(t, b.URL()), "role:work", nil, servers...)

	// Calls by their index: even ones idempotent, every fourth waits for
	// ready without being idempotent, the rest neither.
	idempotent := func(i int) bool { return i%2 == 0 }
	waits := func(i int) bool { return i%2 == 0 || i%4 == 1 }
	call := func(id string, i int) error {
		var opts []runtime.CallOption
		if idempotent(i) {
			opts = append(opts, runtime.Idempotent())
		}
		if waits(i) {
			opts = append(opts, runtime.WaitForReady())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		res, err := cl.Act(ctx, "role:work", map[string]any{"id": id}, opts...)
		if err == nil && res.Value() != id {
			err = fmt.Errorf("answered %v", res.Value())
		}
		return err
	}
	type outcome struct {
		id  string
		i   int
		err error
	}
	var done atomic.Int32
	restartAt := int32(callers * perCaller / 3)
	restart := make(chan struct{})
	var wg sync.WaitGroup
	outcomes := make(chan outcome, callers*perCaller)
	for c := range callers {
		wg.Go(func() {
			for i := range perCaller {
				id := fmt.Sprintf("%d/%d", c, i)
				outcomes <- outcome{id, i, call(id, i)}
				if done.Add(1) == restartAt {
					close(restart)
				}
			}
		})
	}
	testwait.Recv(t, restart)
	b.Stop()
	b.Restart()
	wg.Wait()
	close(outcomes)
	// Back: every call succeeds.
	transporttest.WaitRoutable(t, cl, "role:work")
	testwait.Until(t, "both servers are connected again", func() bool {
		for _, pi := range cl.Patterns() {
			if pi.Pattern.String() == "role:work" {
				return len(pi.Remote) == 2
			}
		}
		return false
	})
	for i := range 20 {
		id := fmt.Sprintf("after/%d", i)
		if err := call(id, i); err != nil {
			t.Errorf("call %s after the restart: %v", id, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var failed, notSent int
	for o := range outcomes {
		n := runs[o.id]
		switch {
		case idempotent(o.i):
			// It may run again after it was lost in flight.
			if o.err != nil || n == 0 {
				t.Errorf("idempotent call %s: %v, ran %d times; want success", o.id, o.err, n)
			}
			continue
		case n > 1:
			t.Errorf("call %s ran %d times", o.id, n)
		case o.err == nil && n != 1:
			t.Errorf("call %s succeeded and ran %d times", o.id, n)
		case o.err != nil && !errors.Is(o.err, runtime.ErrUnavailable):
			t.Errorf("call %s: %v; want success or unavailable", o.id, o.err)
		case o.err != nil && errors.Is(o.err, runtime.ErrNotSent) && (n != 0 || waits(o.i)):
			t.Errorf("call %s failed as not sent (%v) and ran %d times; a call that waits for ready never fails as not sent", o.id, o.err, n)
		}
		if o.err != nil {
			failed++
			if errors.Is(o.err, runtime.ErrNotSent) {
				notSent++
			}
		}
	}
	t.Logf("%d of %d calls failed as unavailable (%d as not sent), none of them idempotent; retries %d, refeeds %d", failed, callers*perCaller, notSent, cl.Stats().Retries, cl.Stats().Refeeds)
}

// TestBrokerLostReportsCalls: when the broker connection is lost, a call
// in flight fails as lost after it was sent (it may have run: not
// ErrNotSent), the connection ends, and a call made on it then fails as
// not sent, as on a lost TCP connection.
func TestBrokerLostReportsCalls(t *testing.T) {
	b := natstest.Start(t)
	started := make(chan struct{}, 1)
	release := transporttest.NewGate(t)
	srv := transporttest.NewServer(t, newTransport(t, b.URL()))
	transporttest.MustAdd(t, srv, "role:block", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-release.C()
		return nil, nil
	})
	conn, err := newTransport(t, b.URL()).Dial(t.Context(), srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := conn.Call(context.Background(), &runtime.Message{Pattern: "role:block", Codec: runtime.CodecJSON, Payload: []byte(`{}`)})
		errc <- err
	}()
	testwait.Recv(t, started)
	b.Stop()
	err = testwait.Recv(t, errc)
	const lost = ": connection lost after the call was sent: the broker connection was lost"
	if err == nil || errors.Is(err, runtime.ErrNotSent) || !strings.Contains(err.Error(), lost) {
		t.Errorf("the call in flight: %v; want %q, not matching ErrNotSent", err, lost)
	}
	testwait.Recv(t, conn.Done())
	_, err = conn.Call(t.Context(), &runtime.Message{Pattern: "role:block"})
	if !errors.Is(err, runtime.ErrNotSent) {
		t.Errorf("a call on the lost connection: %v; want an error that matches ErrNotSent", err)
	}
	release.Open()
}
