package transporttest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

// Run runs the conformance suite against the transports newTransport
// makes, one subtest per scenario.
func Run(t *testing.T, newTransport NewTransport) {
	s := suite{newTransport}
	for _, sc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"RoundTrip", s.roundTrip},
		{"Deadline", s.deadline},
		{"NoReply", s.noReply},
		{"Reconnect", s.reconnect},
		{"GracefulShutdown", s.gracefulShutdown},
		{"RemoteShutdownMovesOn", s.remoteShutdownMovesOn},
		{"RemoteShutdownDrainsChainedCalls", s.remoteShutdownDrainsChainedCalls},
		{"RemoteShutdownDeadline", s.remoteShutdownDeadline},
		{"RestartedCallerRunsAgain", s.restartedCallerRunsAgain},
		{"OverloadedReplicaRoutedAround", s.overloadedReplicaRoutedAround},
		{"AllReplicasOverloaded", s.allReplicasOverloaded},
		{"FairShedding", s.fairShedding},
		{"ReplicaKilledUnderLoad", s.replicaKilledUnderLoad},
		{"StickyRouting", s.stickyRouting},
		{"DedupAnswerNotStolen", s.dedupAnswerNotStolen},
		{"DedupAnswerNotPlanted", s.dedupAnswerNotPlanted},
		{"NoGoroutineLeaks", s.noGoroutineLeaks},
		{"ConcurrentLoad", s.concurrentLoad},
		{"Health", s.health},
		{"Streams", s.streams},
		{"StreamEnds", s.streamEnds},
		{"StreamSlowReader", s.streamSlowReader},
		{"StreamMany", s.streamMany},
		{"StreamShutdown", s.streamShutdown},
	} {
		t.Run(sc.name, sc.run)
	}
}

type suite struct {
	newTransport NewTransport
}

// tr makes a transport whose records nobody reads.
func (s suite) tr(t testing.TB) runtime.Transport { return s.newTransport(t, discard) }

// neg is a typed handler: it negates an Int64Value.
var neg = runtime.NewUnaryHandler(func(ctx context.Context, r *wrapperspb.Int64Value) (*wrapperspb.Int64Value, error) {
	return wrapperspb.Int64(-r.GetValue()), nil
})

func (s suite) roundTrip(t *testing.T) {
	srv := NewServer(t, s.tr(t))
	MustAdd(t, srv, "role:math,cmd:sum", func(ctx context.Context, r runtime.Request) (any, error) {
		return map[string]any{"r": r.Get("a").(float64) + r.Get("b").(float64)}, nil
	})
	MustAdd(t, srv, "role:math,cmd:neg", neg)
	MustAdd(t, srv, "role:math,cmd:fail", func(ctx context.Context, r runtime.Request) (any, error) {
		return nil, runtime.Errorf(runtime.CodeFailedPrecondition, "no can do")
	})
	cl := NewClient(t, s.tr(t), "role:math,cmd:fail", nil, srv.Addr())

	t.Run("JSON", func(t *testing.T) {
		res, err := cl.Act(t.Context(), "role:math,cmd:sum", map[string]any{"a": 1, "b": 2})
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ R float64 }
		if err := res.Decode(&out); err != nil || out.R != 3 {
			t.Fatalf("sum = %+v, %v", out, err)
		}
	})
	t.Run("protobuf", func(t *testing.T) {
		c := TypedClient[wrapperspb.Int64Value, wrapperspb.Int64Value](t, cl, "role:math,cmd:neg")
		r, err := c.Call(t.Context(), wrapperspb.Int64(7))
		if err != nil || r.GetValue() != -7 {
			t.Fatalf("neg = %v, %v", r, err)
		}
	})
	t.Run("error keeps code and message", func(t *testing.T) {
		_, err := cl.Act(t.Context(), "role:math,cmd:fail", nil)
		if runtime.CodeOf(err) != runtime.CodeFailedPrecondition || err.Error() != "no can do" {
			t.Fatalf("code %v, err %v", runtime.CodeOf(err), err)
		}
	})
	t.Run("no handler", func(t *testing.T) {
		if _, err := cl.Act(t.Context(), "role:math,cmd:nope", nil); !errors.Is(err, runtime.ErrNotFound) {
			t.Fatalf("nope: %v", err)
		}
	})
}

type deadlineReport struct {
	deadline time.Time
	ok       bool
	at       time.Time
}

// deadline checks that the remaining budget travels and that a caller's
// cancel reaches the remote handler.
func (s suite) deadline(t *testing.T) {
	srv := NewServer(t, s.tr(t))
	reports := make(chan deadlineReport, 1)
	MustAdd(t, srv, "role:dl,cmd:report", func(ctx context.Context, r runtime.Request) (any, error) {
		dl, ok := ctx.Deadline()
		reports <- deadlineReport{dl, ok, time.Now()}
		return nil, nil
	})
	started := make(chan struct{}, 1)
	ended := make(chan error, 1)
	MustAdd(t, srv, "role:dl,cmd:block", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, ctx.Err()
	})
	cl := NewClient(t, s.tr(t), "role:dl,cmd:block", nil, srv.Addr())
	short := NewClient(t, s.tr(t), "role:dl,cmd:block", []runtime.Option{runtime.WithDefaultTimeout(1500 * time.Millisecond)}, srv.Addr())

	// remaining checks that the handler's budget is within (want-slack, want].
	remaining := func(t *testing.T, want time.Duration) {
		t.Helper()
		r := testwait.Recv(t, reports)
		if !r.ok {
			t.Fatal("the remote handler's ctx has no deadline")
		}
		got := r.deadline.Sub(r.at)
		if got > want || got < want-time.Second {
			t.Errorf("the remote handler had %v left, want about %v", got, want)
		}
	}

	// A short caller's deadline and a long one (beyond the default).
	for _, d := range []time.Duration{3 * time.Second, time.Minute} {
		t.Run(fmt.Sprintf("the caller's deadline of %v", d), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), d)
			defer cancel()
			callerDL, _ := ctx.Deadline()
			if _, err := cl.ActE(ctx, "role:dl,cmd:report", nil); err != nil {
				t.Fatal(err)
			}
			r := testwait.Recv(t, reports)
			// The budget, not the instant, travels: the deadline moves by
			// the transit time at most.
			if d := r.deadline.Sub(callerDL); !r.ok || d < -time.Millisecond || d > time.Second {
				t.Errorf("remote deadline %v (set %v), caller's %v (diff %v)", r.deadline, r.ok, callerDL, d)
			}
		})
	}
	t.Run("the default 5s", func(t *testing.T) {
		if _, err := cl.ActE(context.Background(), "role:dl,cmd:report", nil); err != nil {
			t.Fatal(err)
		}
		remaining(t, 5*time.Second)
	})
	t.Run("WithDefaultTimeout", func(t *testing.T) {
		if _, err := short.ActE(context.Background(), "role:dl,cmd:report", nil); err != nil {
			t.Fatal(err)
		}
		remaining(t, 1500*time.Millisecond)
	})
	t.Run("the caller's deadline before the default", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		if _, err := short.ActE(ctx, "role:dl,cmd:report", nil); err != nil {
			t.Fatal(err)
		}
		remaining(t, time.Hour)
	})
	t.Run("Timeout shorter than the caller's deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		if _, err := cl.ActE(ctx, "role:dl,cmd:report", nil, runtime.Timeout(2*time.Second)); err != nil {
			t.Fatal(err)
		}
		remaining(t, 2*time.Second)
	})
	t.Run("Timeout longer than the caller's deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		if _, err := cl.ActE(ctx, "role:dl,cmd:report", nil, runtime.Timeout(time.Hour)); err != nil {
			t.Fatal(err)
		}
		remaining(t, 2*time.Second)
	})
	t.Run("NoReply", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		if _, err := cl.ActE(ctx, "role:dl,cmd:report", nil, runtime.NoReply()); err != nil {
			t.Fatal(err)
		}
		remaining(t, 3*time.Second)
	})

	// A short deadline and a longer one: both end the remote handler.
	for _, d := range []time.Duration{50 * time.Millisecond, 300 * time.Millisecond} {
		t.Run(fmt.Sprintf("expiry after %v ends the remote handler", d), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), d)
			defer cancel()
			_, err := cl.ActE(ctx, "role:dl,cmd:block", nil)
			WantCode(t, err, runtime.CodeDeadlineExceeded)
			testwait.Recv(t, started)
			// The remote deadline, or the cancel the caller sends when its
			// own deadline (a little earlier: the budget left at sending)
			// passes.
			if err := testwait.Recv(t, ended); err != context.DeadlineExceeded && err != context.Canceled {
				t.Errorf("the handler's ctx ended with %v", err)
			}
		})
	}

	t.Run("cancel reaches the remote handler", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		call := ActAsync(ctx, cl, "role:dl,cmd:block")
		testwait.Recv(t, started)
		cancel()
		WantCode(t, testwait.Recv(t, call).Err, runtime.CodeCanceled)
		if err := testwait.Recv(t, ended); err != context.Canceled {
			t.Errorf("the handler's ctx ended with %v", err)
		}
	})

	t.Run("an expired context is not sent", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := cl.ActE(ctx, "role:dl,cmd:block", nil)
		WantCode(t, err, runtime.CodeCanceled)
		select {
		case <-started:
			t.Error("the handler ran")
		default:
		}
	})
}

// noReply: the call returns at once, the handler runs once.
func (s suite) noReply(t *testing.T) {
	srv := NewServer(t, s.tr(t))
	var runs atomic.Int32
	started := make(chan any, 4)
	release := NewGate(t)
	done := make(chan struct{}, 4)
	MustAdd(t, srv, "role:fire,cmd:forget", func(ctx context.Context, r runtime.Request) (any, error) {
		runs.Add(1)
		started <- r.Get("n")
		<-release.C()
		done <- struct{}{}
		return "an answer nobody reads", nil
	})
	MustAdd(t, srv, "role:fire,cmd:sync", func(ctx context.Context, r runtime.Request) (any, error) { return "ok", nil })
	cl := NewClient(t, s.tr(t), "role:fire,cmd:sync", nil, srv.Addr())

	// The handler blocks until release: a call waiting for its answer
	// would not return.
	res, err := cl.ActE(t.Context(), "role:fire,cmd:forget", map[string]any{"n": 1}, runtime.NoReply())
	if err != nil || res.Value() != nil {
		t.Fatalf("NoReply call = %v, %v", res.Value(), err)
	}
	if got := testwait.Recv(t, started); got != 1.0 {
		t.Errorf("the handler got n = %v", got)
	}
	// Through a typed client too.
	c := TypedClient[map[string]any, map[string]any](t, cl, "role:fire,cmd:forget", runtime.NoReply())
	out, err := c.Call(t.Context(), &map[string]any{"n": 2})
	if err != nil || out != nil {
		t.Fatalf("typed NoReply call = %v, %v", out, err)
	}
	if got := testwait.Recv(t, started); got != 2.0 {
		t.Errorf("the handler got n = %v", got)
	}
	release.Open()
	testwait.Recv(t, done)
	testwait.Recv(t, done)
	// A later call on the same connection: had an answer been sent for the
	// no-reply calls, the client would have dropped it by now.
	if res, err := cl.ActE(t.Context(), "role:fire,cmd:sync", nil); err != nil || res.Value() != "ok" {
		t.Fatalf("sync call = %v, %v", res.Value(), err)
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("the handler ran %d times, want 2", n)
	}
	// A no-reply call that no pattern matches still fails.
	if _, err := cl.ActE(t.Context(), "role:fire,cmd:nothing", nil, runtime.NoReply()); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("no-reply call without a match: %v", err)
	}
}

// reconnect stops a server and starts a new one on the same address: the
// client reconnects by itself and later calls succeed.
func (s suite) reconnect(t *testing.T) {
	start := func(addr, gen string) *runtime.Node {
		t.Helper()
		n := NewServer(t, s.tr(t), runtime.WithListen(addr))
		MustAdd(t, n, "role:r,cmd:who", func(ctx context.Context, r runtime.Request) (any, error) { return gen, nil })
		MustAdd(t, n, "role:r,gen:"+gen, func(ctx context.Context, r runtime.Request) (any, error) { return gen, nil })
		return n
	}
	who := func(cl *runtime.Node) (any, error) {
		res, err := cl.ActE(t.Context(), "role:r,cmd:who", nil)
		return res.Value(), err
	}

	s1 := start("127.0.0.1:0", "1")
	addr := s1.Addr()
	// Reconnecting fetches the catalog by itself. A redial that lands
	// between the restarted server's listen and its Adds fetches it
	// empty, and the refresh (the runtime's default, 2s) fetches it
	// again, as the runtime documents.
	cl := NewClient(t, s.tr(t), "role:r,gen:1", []runtime.Option{runtime.WithCatalogRefresh(2 * time.Second)}, addr)
	if got, err := who(cl); got != "1" || err != nil {
		t.Fatalf("first server: %v, %v", got, err)
	}

	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the client drops the stopped server's patterns", func() bool { return !Routes(cl, "role:r,cmd:who") })
	// Meanwhile calls fail at once, without hanging, and say why: the
	// server that may serve them cannot be reached (issue 13), not that
	// nobody serves them.
	if _, err := who(cl); !errors.Is(err, runtime.ErrUnavailable) || !strings.Contains(err.Error(), addr) {
		t.Errorf("server down: %v, want unavailable naming %s", err, addr)
	}

	start(addr, "2")
	WaitRoutable(t, cl, "role:r,gen:2")
	for range 3 {
		if got, err := who(cl); got != "2" || err != nil {
			t.Fatalf("restarted server: %v, %v", got, err)
		}
	}
	if Routes(cl, "role:r,gen:1") {
		t.Errorf("the first server's catalog is still routed: %v", cl.Patterns())
	}
}

// gracefulShutdown shuts a server down while a call runs on it: that call
// finishes, new ones fail cleanly (and surely did not run).
func (s suite) gracefulShutdown(t *testing.T) {
	srv := NewServer(t, s.tr(t))
	started := make(chan struct{}, 1)
	release := NewGate(t)
	ran := make(chan string, 8)
	MustAdd(t, srv, "role:slow", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-release.C()
		return "slow done", nil
	})
	MustAdd(t, srv, "role:fast", func(ctx context.Context, r runtime.Request) (any, error) {
		ran <- "fast"
		return "fast", nil
	})
	var log Log
	cl := NewClient(t, s.newTransport(t, log.Logger()), "role:fast", nil, srv.Addr())

	inflight := ActAsync(context.Background(), cl, "role:slow")
	testwait.Recv(t, started)

	goaway := log.Seen("going away")
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	testwait.Recv(t, goaway)

	_, err := cl.ActE(t.Context(), "role:fast", nil)
	WantCode(t, err, runtime.CodeUnavailable)
	if !errors.Is(err, runtime.ErrNotSent) {
		t.Errorf("errors.Is(%v, ErrNotSent) = false: the caller cannot tell it did not run", err)
	}
	select {
	case <-ran:
		t.Error("a call made after the goaway ran")
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a call in flight", err)
	case r := <-inflight:
		t.Fatalf("the call in flight ended early: %v, %v", r.V, r.Err)
	default:
	}

	release.Open()
	if r := testwait.Recv(t, inflight); r.V != "slow done" || r.Err != nil {
		t.Errorf("the call in flight = %v, %v", r.V, r.Err)
	}
	if err := testwait.Recv(t, shut); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	// Once the server is gone, its patterns leave the client.
	testwait.Until(t, "the client drops the server's patterns", func() bool { return !Routes(cl, "role:fast") })
}

// remoteShutdownMovesOn: with two servers serving a pattern, calls that a
// server going away refuses go to the other one.
func (s suite) remoteShutdownMovesOn(t *testing.T) {
	a := NewServer(t, s.tr(t))
	b := NewServer(t, s.tr(t))
	started := make(chan struct{}, 1)
	release := NewGate(t)
	MustAdd(t, a, "role:only-a", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-release.C()
		return "a done", nil
	})
	MustAdd(t, b, "role:only-b", func(ctx context.Context, r runtime.Request) (any, error) { return "b", nil })
	MustAdd(t, a, "role:both", func(ctx context.Context, r runtime.Request) (any, error) { return "a", nil })
	MustAdd(t, b, "role:both", func(ctx context.Context, r runtime.Request) (any, error) { return "b", nil })
	var log Log
	cl := NewClient(t, s.newTransport(t, log.Logger()), "role:only-a", nil, a.Addr(), b.Addr())
	WaitRoutable(t, cl, "role:only-b")

	// Both serve role:both (the default balancer draws two at random and
	// takes the one with fewer calls in flight: serial calls go to either).
	seen := map[any]int{}
	for i := 0; i < 200 && (seen["a"] == 0 || seen["b"] == 0); i++ {
		res, err := cl.ActE(t.Context(), "role:both", nil)
		if err != nil {
			t.Fatal(err)
		}
		seen[res.Value()]++
	}
	if seen["a"] == 0 || seen["b"] == 0 {
		t.Errorf("before the shutdown, served by %v; want a and b", seen)
	}

	inflight := ActAsync(context.Background(), cl, "role:only-a")
	testwait.Recv(t, started)
	goaway := log.Seen("going away")
	shut := make(chan error, 1)
	go func() { shut <- a.Shutdown(context.Background()) }()
	testwait.Recv(t, goaway)

	for i := range 10 {
		res, err := cl.ActE(t.Context(), "role:both", nil)
		if err != nil || res.Value() != "b" {
			t.Fatalf("call %d while a goes away: %v, %v; want b", i, res.Value(), err)
		}
	}
	_, err := cl.ActE(t.Context(), "role:only-a", nil)
	WantCode(t, err, runtime.CodeUnavailable)

	release.Open()
	if err := testwait.Recv(t, inflight).Err; err != nil {
		t.Errorf("the call in flight on a: %v", err)
	}
	if err := testwait.Recv(t, shut); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
}

// remoteShutdownDrainsChainedCalls: a server shutting down keeps its own
// peers until the calls it drains are done, for they may call them.
func (s suite) remoteShutdownDrainsChainedCalls(t *testing.T) {
	back := NewServer(t, s.tr(t))
	started := make(chan struct{}, 1)
	release := NewGate(t)
	MustAdd(t, back, "role:back", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-release.C()
		return "back done", nil
	})
	front := NewServer(t, s.tr(t), runtime.WithDiscovery(runtime.StaticPeers(back.Addr())))
	WaitRoutable(t, front, "role:back")
	MustAdd(t, front, "role:front", func(ctx context.Context, r runtime.Request) (any, error) {
		res, err := front.ActE(ctx, "role:back", nil)
		return res.Value(), err
	})
	var log Log
	cl := NewClient(t, s.newTransport(t, log.Logger()), "role:front", nil, front.Addr())

	done := ActAsync(context.Background(), cl, "role:front")
	testwait.Recv(t, started)
	goaway := log.Seen("going away")
	shut := make(chan error, 1)
	go func() { shut <- front.Shutdown(context.Background()) }()
	testwait.Recv(t, goaway)
	release.Open()
	if r := testwait.Recv(t, done); r.Err != nil || r.V != "back done" {
		t.Errorf("the chained call = %v, %v", r.V, r.Err)
	}
	if err := testwait.Recv(t, shut); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
}

// remoteShutdownDeadline: when Shutdown's ctx ends first, the calls in
// flight are cancelled and fail; Shutdown returns ctx's error.
func (s suite) remoteShutdownDeadline(t *testing.T) {
	srv := NewServer(t, s.tr(t))
	started := make(chan struct{}, 1)
	ended := make(chan error, 1)
	MustAdd(t, srv, "role:stuck", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, ctx.Err()
	})
	cl := NewClient(t, s.tr(t), "role:stuck", nil, srv.Addr())
	call := ActAsync(context.Background(), cl, "role:stuck")
	testwait.Recv(t, started)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown = %v, want context.Canceled", err)
	}
	if err := testwait.Recv(t, ended); err != context.Canceled {
		t.Errorf("the handler's ctx ended with %v", err)
	}
	err := testwait.Recv(t, call).Err
	WantCode(t, err, runtime.CodeUnavailable)
	if errors.Is(err, runtime.ErrNotSent) {
		t.Errorf("%v says the call was not sent, but it ran", err)
	}
}

// restartedCallerRunsAgain: a caller that restarts under the same node id
// starts its call ids afresh; the server must not take its new calls for
// the earlier run's calls and answer them from the stored answers.
func (s suite) restartedCallerRunsAgain(t *testing.T) {
	srv := NewServer(t, s.tr(t))
	var runs atomic.Int32
	MustAdd(t, srv, "role:pay", func(ctx context.Context, r runtime.Request) (any, error) {
		return fmt.Sprint("payment ", runs.Add(1)), nil
	})
	for run := 1; run <= 3; run++ {
		cl := NewClient(t, s.tr(t), "role:pay", []runtime.Option{runtime.WithID("till")}, srv.Addr())
		res, err := cl.ActE(t.Context(), "role:pay", nil)
		if want := fmt.Sprint("payment ", run); err != nil || res.Value() != want {
			t.Errorf("run %d of the caller: %v, %v; want %q", run, res.Value(), err, want)
		}
		if err := cl.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// noGoroutineLeaks runs calls of every kind, with a peer that never
// answers, closes the nodes and checks that their goroutines are gone.
func (s suite) noGoroutineLeaks(t *testing.T) {
	checkLeaks := leak.Mark(t)
	func() {
		srv, err := runtime.New(runtime.WithTransport(s.tr(t)), runtime.WithListen("127.0.0.1:0"))
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		blocked := make(chan struct{}, 1)
		MustAdd(t, srv, "role:leak,cmd:ok", func(ctx context.Context, r runtime.Request) (any, error) { return r.Msg(), nil })
		MustAdd(t, srv, "role:leak,cmd:block", func(ctx context.Context, r runtime.Request) (any, error) {
			blocked <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		})
		cl, err := runtime.New(runtime.WithTransport(s.tr(t)), runtime.WithDiscovery(runtime.StaticPeers(srv.Addr(), FreeAddr(t))))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		WaitRoutable(t, cl, "role:leak,cmd:block")
		ctx := t.Context()
		if _, err := cl.ActE(ctx, "role:leak,cmd:ok", wrapperspb.Int64(1)); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.ActE(ctx, "role:leak,cmd:ok", nil, runtime.NoReply()); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		go func() { <-blocked; cancel() }()
		if _, err := cl.ActE(cctx, "role:leak,cmd:block", nil); runtime.CodeOf(err) != runtime.CodeCanceled {
			t.Fatalf("cancelled call: %v", err)
		}
		// A call in flight when the nodes close.
		go cl.ActE(ctx, "role:leak,cmd:block", nil)
		testwait.Recv(t, blocked)
	}()
	checkLeaks()
}

// concurrentLoad is [Load].
func (s suite) concurrentLoad(t *testing.T) {
	Load(t, s.newTransport)
}

// Load runs many concurrent calls of several kinds (typed, JSON, failing)
// to two servers, over one connection per peer, for the race detector.
// [Run] runs it; a transport's tests run it again under a configuration
// of their own (fewer streams, say).
func Load(t *testing.T, newTransport NewTransport) {
	const workers, calls = 8, 200
	tr := func() runtime.Transport { return newTransport(t, discard) }
	a := NewServer(t, tr(), runtime.WithID("a"))
	b := NewServer(t, tr(), runtime.WithID("b"))
	for _, s := range []*runtime.Node{a, b} {
		MustAdd(t, s, "role:load,cmd:double", runtime.NewUnaryHandler(func(ctx context.Context, r *wrapperspb.Int64Value) (*wrapperspb.Int64Value, error) {
			return wrapperspb.Int64(2 * r.GetValue()), nil
		}))
		MustAdd(t, s, "role:load,cmd:sum", func(ctx context.Context, r runtime.Request) (any, error) {
			return map[string]any{"r": r.Get("a").(float64) + r.Get("b").(float64)}, nil
		})
		MustAdd(t, s, "role:load,cmd:fail", func(ctx context.Context, r runtime.Request) (any, error) {
			return nil, runtime.Errorf(runtime.CodeAborted, "wizard: abort %v", r.Get("i"))
		})
	}
	cl := NewClient(t, tr(), "role:load,cmd:fail", nil, a.Addr(), b.Addr())
	double := TypedClient[wrapperspb.Int64Value, wrapperspb.Int64Value](t, cl, "role:load,cmd:double")

	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			ctx := context.Background()
			for i := range calls {
				n := int64(w*calls + i)
				var err error
				switch i % 4 {
				case 0, 1:
					var r *wrapperspb.Int64Value
					if r, err = double.Call(ctx, wrapperspb.Int64(n)); err == nil && r.GetValue() != 2*n {
						err = fmt.Errorf("double(%d) = %d", n, r.GetValue())
					}
				case 2:
					var res runtime.Result
					if res, err = cl.Act(ctx, "role:load,cmd:sum", map[string]any{"a": n, "b": 1}); err == nil {
						var out struct{ R int64 }
						if err = res.Decode(&out); err == nil && out.R != n+1 {
							err = fmt.Errorf("sum(%d, 1) = %d", n, out.R)
						}
					}
				case 3:
					_, err = cl.ActE(ctx, "role:load,cmd:fail", map[string]any{"i": n})
					if want := fmt.Sprintf("wizard: abort %d", n); runtime.CodeOf(err) == runtime.CodeAborted && err.Error() == want {
						err = nil
					} else {
						err = fmt.Errorf("fail(%d) = %v, want %s", n, err, want)
					}
				}
				if err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}
