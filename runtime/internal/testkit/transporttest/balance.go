package transporttest

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
	"github.com/wizardmesh/wizard/runtime/lb"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// The scenarios of calls spread over replicas: overload, a replica going
// away under load, sticky routing.

// replicas starts n servers of role:work (answering their index); each
// also serves role:hold, which blocks on hold, so that a test can fill
// its in-flight slots. opts apply to the first server.
func (s suite) replicas(t *testing.T, n int, hold *Gate, opts ...runtime.Option) []*runtime.Node {
	t.Helper()
	var out []*runtime.Node
	for i := range n {
		var srv *runtime.Node
		if i == 0 {
			srv = NewServer(t, s.tr(t), opts...)
		} else {
			srv = NewServer(t, s.tr(t))
		}
		MustAdd(t, srv, "role:work", func(ctx context.Context, r runtime.Request) (any, error) { return i, nil })
		MustAdd(t, srv, "role:hold", func(ctx context.Context, r runtime.Request) (any, error) {
			<-hold.C()
			return nil, nil
		})
		out = append(out, srv)
	}
	return out
}

// addrs returns the nodes' listen addresses.
func addrs(nodes []*runtime.Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Addr())
	}
	return out
}

// waitTargets waits until n routes pat to want remote targets,
// failing t after the [testwait.Guard].
func waitTargets(t testing.TB, n *runtime.Node, pat string, want int) {
	t.Helper()
	p := pattern.MustParse(pat)
	testwait.Until(t, fmt.Sprintf("%d targets for %s", want, pat), func() bool {
		for _, pi := range n.Patterns() {
			if pi.Pattern.Equal(p) {
				return len(pi.Remote) == want
			}
		}
		return false
	})
}

// holdSlot fills one in-flight slot of srv with a role:hold call from a
// client of its own, and waits until the slot is taken.
func (s suite) holdSlot(t *testing.T, srv *runtime.Node) {
	t.Helper()
	cl := NewClient(t, s.tr(t), "role:hold", nil, srv.Addr())
	held := make(chan struct{}, 1)
	hold := func() {
		go func() {
			cl.ActE(context.Background(), "role:hold", nil, runtime.Timeout(time.Minute))
			select {
			case held <- struct{}{}:
			default: // the test is over: the gate opened
			}
		}()
	}
	hold()
	testwait.Until(t, "the slot is taken", func() bool {
		select {
		case <-held:
			// Refused: the probe below had the one slot when the hold
			// call arrived. Hold again.
			hold()
		default:
		}
		_, err := srv.ActE(t.Context(), "role:work", nil)
		return errors.Is(err, runtime.ErrResourceExhausted)
	})
}

// overloadedReplicaRoutedAround: one of three replicas is over its
// in-flight limit; every call succeeds through the other two, and the
// overloaded one's refusals are counted. With breakers, its breaker opens
// at the first refusal and it gets no more calls.
func (s suite) overloadedReplicaRoutedAround(t *testing.T) {
	for _, withBreakers := range []bool{false, true} {
		t.Run(fmt.Sprintf("breakers=%v", withBreakers), func(t *testing.T) {
			hold := NewGate(t)
			defer hold.Open()
			reps := s.replicas(t, 3, hold, runtime.WithMaxInFlight(1))
			s.holdSlot(t, reps[0])
			shedBefore := reps[0].Stats().Shed
			var opts []runtime.Option
			br, err := lb.NewBreakers[*runtime.Target](lb.WithDelay(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if withBreakers {
				opts = append(opts, runtime.WithBreakers(func(tg *runtime.Target) runtime.Breaker { return br.Get(tg) }))
			}
			cl := NewClient(t, s.tr(t), "role:work", opts, addrs(reps)...)
			waitTargets(t, cl, "role:work", 3)
			const calls = 30
			answered := map[any]int{}
			for range calls {
				res, err := cl.ActE(t.Context(), "role:work", nil)
				if err != nil {
					t.Fatalf("call: %v", err)
				}
				answered[res.Value()]++
			}
			if answered[0.0] != 0 {
				t.Errorf("the overloaded replica answered %d calls", answered[0.0])
			}
			shed := reps[0].Stats().Shed - shedBefore
			if shed == 0 {
				t.Error("the overloaded replica refused no call: the test did not exercise shedding")
			}
			if got := cl.Stats().Retries; got != shed {
				t.Errorf("the caller retried %d times for %d refusals", got, shed)
			}
			if withBreakers && shed != 1 {
				t.Errorf("with breakers the overloaded replica was asked %d times, want 1 (its breaker opens)", shed)
			}
			t.Logf("answers by replica %v; refusals %d", answered, shed)
			if withBreakers {
				if br.Len() != 3 {
					t.Errorf("%d breakers for 3 targets", br.Len())
				}
				cl.Close() // its targets leave: their breakers are dropped
				if br.Len() != 0 {
					t.Errorf("%d breakers left after every target left", br.Len())
				}
			}
		})
	}
}

// allReplicasOverloaded: when every target refuses, the caller gets one
// clear error that says so.
func (s suite) allReplicasOverloaded(t *testing.T) {
	hold := NewGate(t)
	defer hold.Open()
	var reps []*runtime.Node
	for range 2 {
		srv := NewServer(t, s.tr(t), runtime.WithMaxInFlight(1))
		MustAdd(t, srv, "role:work", func(ctx context.Context, r runtime.Request) (any, error) { return nil, nil })
		MustAdd(t, srv, "role:hold", func(ctx context.Context, r runtime.Request) (any, error) {
			<-hold.C()
			return nil, nil
		})
		s.holdSlot(t, srv)
		reps = append(reps, srv)
	}
	cl := NewClient(t, s.tr(t), "role:work", nil, addrs(reps)...)
	waitTargets(t, cl, "role:work", 2)
	_, err := cl.ActE(t.Context(), "role:work", nil)
	WantCode(t, err, runtime.CodeResourceExhausted)
	if !errors.Is(err, runtime.ErrResourceExhausted) {
		t.Errorf("errors.Is(%v, ErrResourceExhausted) = false", err)
	}
	const want = `wizard: every target serving "role:work" refused the call as overloaded (2 tried)`
	if err.Error() != want {
		t.Errorf("error %q, want %q", err.Error(), want)
	}
}

// fairShedding: a node floods a server that has an in-flight limit with
// 64 callers in a loop; a well-behaved node's calls, four at a time, are
// still served (at least 95%: the flood holds more than its share only
// for a moment when the caller becomes busy; before the server shared its
// limit among connections, most failed). The flood's calls beyond its
// share are refused.
func (s suite) fairShedding(t *testing.T) {
	const limit, flooders, callers, perCaller = 20, 64, 4, 50
	srv := NewServer(t, s.tr(t), runtime.WithMaxInFlight(limit))
	MustAdd(t, srv, "role:work", func(ctx context.Context, r runtime.Request) (any, error) {
		time.Sleep(2 * time.Millisecond) // work, so that the flood holds its slots; not synchronisation
		return nil, nil
	})
	flood := NewClient(t, s.tr(t), "role:work", nil, srv.Addr())
	good := NewClient(t, s.tr(t), "role:work", nil, srv.Addr())

	ctx, stop := context.WithCancel(t.Context())
	var floods sync.WaitGroup
	var flooded, refused atomic.Int64
	saturated := make(chan struct{})
	once := sync.OnceFunc(func() { close(saturated) })
	for range flooders {
		floods.Go(func() {
			for ctx.Err() == nil {
				_, err := flood.ActE(ctx, "role:work", nil)
				switch {
				case err == nil:
					flooded.Add(1)
				case errors.Is(err, runtime.ErrResourceExhausted):
					refused.Add(1)
					once()
				}
			}
		})
	}
	defer func() {
		stop()
		floods.Wait()
	}()
	testwait.Recv(t, saturated)
	WantServedUnderFlood(t, good, "role:work", callers, perCaller)
	t.Logf("flood: %d served, %d refused", flooded.Load(), refused.Load())
}

// WantServedUnderFlood makes callers×perCaller calls of pattern through
// cl, callers at a time, while something floods the server, and fails t
// unless at least 95% of them are served. It returns the last error.
func WantServedUnderFlood(t testing.TB, cl *runtime.Node, pattern string, callers, perCaller int) error {
	t.Helper()
	var ok atomic.Int64
	var lastErr atomic.Value
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range perCaller {
				if _, err := cl.ActE(t.Context(), pattern, nil); err != nil {
					lastErr.Store(err)
					continue
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	t.Logf("well-behaved caller: %d of %d served", ok.Load(), callers*perCaller)
	if got, want := ok.Load(), int64(callers*perCaller*95/100); got < want {
		t.Errorf("the well-behaved caller got %d of %d calls served under a flood, want at least %d; last error: %v", got, callers*perCaller, want, lastErr.Load())
	}
	err, _ := lastErr.Load().(error)
	return err
}

// replicaKilledUnderLoad: three replicas under steady, bounded load of
// idempotent calls; one is killed mid-run. No call fails, and the
// handlers' counters show how often each call ran. A graceful kill
// (Shutdown: goaway, drain) runs no call twice; a hard kill (Close) can
// run a call twice only if it ran on the killed replica, whose answer was
// lost — at most one per caller.
func (s suite) replicaKilledUnderLoad(t *testing.T) {
	for _, hard := range []bool{false, true} {
		name := "graceful"
		if hard {
			name = "hard"
		}
		t.Run(name, func(t *testing.T) { s.killReplicaUnderLoad(t, hard) })
	}
}

func (s suite) killReplicaUnderLoad(t *testing.T, hard bool) {
	const callers, perCaller = 8, 60
	var mu sync.Mutex
	runs := map[string]int{}
	var reps []*runtime.Node
	for range 3 {
		srv := NewServer(t, s.tr(t))
		MustAdd(t, srv, "role:work", func(ctx context.Context, r runtime.Request) (any, error) {
			id := r.Get("id").(string)
			time.Sleep(200 * time.Microsecond) // work, so that calls overlap the kill; not synchronisation
			mu.Lock()
			runs[id]++
			mu.Unlock()
			return id, nil
		})
		reps = append(reps, srv)
	}
	var log Log // why a connection closed, should a call run twice
	cl := NewClient(t, s.newTransport(t, log.Logger()), "role:work", nil, addrs(reps)...)
	waitTargets(t, cl, "role:work", 3)

	var done atomic.Int32
	killAt := int32(callers * perCaller / 3)
	killed := make(chan struct{})
	var wg sync.WaitGroup
	var failed atomic.Int32
	for c := range callers {
		wg.Go(func() {
			for i := range perCaller {
				id := fmt.Sprintf("%d/%d", c, i)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				res, err := cl.Act(ctx, "role:work", map[string]any{"id": id}, runtime.Idempotent())
				cancel()
				if err != nil || res.Value() != id {
					failed.Add(1)
					t.Errorf("call %s: %v, %v", id, res.Value(), err)
				}
				if done.Add(1) == killAt {
					close(killed)
				}
			}
		})
	}
	testwait.Recv(t, killed)
	if hard {
		reps[1].Close()
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := reps[1].Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		cancel()
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Errorf("%d idempotent calls failed", n)
	}
	mu.Lock()
	defer mu.Unlock()
	dups := 0
	for id, n := range runs {
		if n == 0 || n > 2 {
			t.Errorf("call %s ran %d times", id, n)
		}
		dups += n - 1
	}
	if len(runs) != callers*perCaller {
		t.Errorf("%d calls ran, want %d", len(runs), callers*perCaller)
	}
	switch {
	case !hard && dups != 0:
		t.Errorf("a graceful kill ran %d calls twice", dups)
	case hard && dups > callers:
		t.Errorf("a hard kill ran %d calls twice; at most one per caller can be in flight", dups)
	}
	t.Logf("%s kill: retries %d, calls run twice %d", map[bool]string{false: "graceful", true: "hard"}[hard], cl.Stats().Retries, dups)
	if t.Failed() {
		t.Logf("the caller's transport log:\n%s", log.String())
	}
}

// stickyRouting: with runtime/lb's consistent hash, calls with the same
// RouteKey reach the same replica, and different keys spread over them.
func (s suite) stickyRouting(t *testing.T) {
	hold := NewGate(t)
	defer hold.Open()
	reps := s.replicas(t, 3, hold)
	hash := runtime.WithBalancer(func(pattern.Pattern) runtime.Balancer {
		b, err := lb.NewConsistentHash(func(t *runtime.Target) string { return t.Addr() }, 100)
		if err != nil {
			panic(err) // not with these arguments
		}
		return b
	})
	cl := NewClient(t, s.tr(t), "role:work", []runtime.Option{hash}, addrs(reps)...)
	waitTargets(t, cl, "role:work", 3)
	seen := map[any]bool{}
	for k := range 30 {
		key := fmt.Sprintf("user-%d", k)
		var first any
		for i := range 5 {
			res, err := cl.ActE(t.Context(), "role:work", nil, runtime.RouteKey(key))
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = res.Value()
			} else if res.Value() != first {
				t.Fatalf("key %s went to replica %v, then %v", key, first, res.Value())
			}
		}
		seen[first] = true
	}
	if len(seen) != 3 {
		t.Errorf("30 keys reached replicas %v, want all three", seen)
	}
}
