package runtime_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// switchBreaker is a breaker the test opens and closes.
type switchBreaker struct{ open atomic.Bool }

func (b *switchBreaker) Allow() bool  { return !b.open.Load() }
func (b *switchBreaker) Success()     {}
func (b *switchBreaker) Failure()     {}
func (b *switchBreaker) Open()        {}
func (b *switchBreaker) IsOpen() bool { return b.open.Load() }

// TestExplainTargets: Explain lists a remote pattern's targets with their
// connection, breaker and in-flight calls, names the next pick when only
// one target can take a call, and the refusal when none can.
func TestExplainTargets(t *testing.T) {
	tr, err := tcp.New()
	if err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	entered := make(chan struct{}, 1)
	var servers []*runtime.Node
	for range 2 {
		s := newTestNode(t, runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"))
		if err := s.Add("role:t", func(ctx context.Context, r runtime.Request) (any, error) {
			if r.Get("hold") == "yes" {
				entered <- struct{}{}
				<-hold
			}
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
		servers = append(servers, s)
	}
	var mu sync.Mutex
	breakers := map[string]*switchBreaker{}
	cl := newTestNode(t, runtime.WithTransport(tr),
		runtime.WithDiscovery(runtime.StaticPeers(servers[0].Addr(), servers[1].Addr())),
		runtime.WithBreakers(func(tg *runtime.Target) runtime.Breaker {
			mu.Lock()
			defer mu.Unlock()
			b := &switchBreaker{}
			breakers[tg.Addr()] = b
			return b
		}))
	explain := func() runtime.Explanation {
		x, err := cl.Explain("role:t")
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	testwait.Until(t, "two connected targets", func() bool {
		x := explain()
		return len(x.Targets) == 2 && x.Targets[0].Connected && x.Targets[1].Connected
	})
	// Calls until both targets have a breaker.
	testwait.Until(t, "a breaker for each target", func() bool {
		if _, err := cl.ActE(t.Context(), "role:t", nil); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return len(breakers) == 2
	})
	a, b := servers[0].Addr(), servers[1].Addr()
	mu.Lock()
	breakers[a].open.Store(true)
	mu.Unlock()
	x := explain()
	if x.Refused != nil || x.Next != b || !strings.Contains(x.NextReason, "only target") {
		t.Errorf("one breaker open: Next %q (%s), Refused %v; want %s, the only one", x.Next, x.NextReason, x.Refused, b)
	}
	for _, tg := range x.Targets {
		if want := map[bool]string{true: "open", false: "closed"}[tg.Addr == a]; tg.Breaker != want {
			t.Errorf("target %s: breaker %q, want %q", tg.Addr, tg.Breaker, want)
		}
	}
	// A call in flight shows.
	done := make(chan error, 1)
	go func() {
		_, err := cl.ActE(t.Context(), "role:t", map[string]any{"hold": "yes"}, runtime.Mixin("hold"))
		done <- err
	}()
	testwait.Recv(t, entered)
	x = explain()
	for _, tg := range x.Targets {
		if tg.Addr == b && tg.InFlight != 1 {
			t.Errorf("target %s: %d in flight, want 1", b, tg.InFlight)
		}
	}
	close(hold)
	if err := testwait.Recv(t, done); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	breakers[b].open.Store(true)
	mu.Unlock()
	x = explain()
	if x.Refused == nil || x.Refused.Code != runtime.CodeUnavailable || !strings.Contains(x.Refused.Message, "breaker open") || x.Next != "" {
		t.Errorf("both breakers open: Refused %v, Next %q; want unavailable, no pick", x.Refused, x.Next)
	}
	// Not connected: the route goes with the peers' catalogs.
	for _, s := range servers {
		s.Close()
	}
	testwait.Within(t, 10*time.Second, "the targets gone", func() bool {
		x := explain()
		return x.Refused != nil && x.Refused.Code == runtime.CodeUnavailable && !x.Found
	})
}
