package swim_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/pattern"
	"github.com/wizardmesh/wizard/runtime/swim"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// testLogger logs node id's lines to stderr when WIZARD_SWIM_LOG is set,
// else nowhere.
func testLogger(id string) *slog.Logger {
	if os.Getenv("WIZARD_SWIM_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("at", id)
}

// member is one node of a test cluster.
type member struct {
	id string
	n  *runtime.Node
	d  *swim.Discovery
}

// pattern is the pattern only m serves.
func (m *member) pattern() string { return patternOf(m.id) }

func patternOf(id string) string { return "role:swimtest,node:" + id }

// startMember starts a node with TCP and Fast-preset gossip on loopback,
// serving its own pattern, and closes it when the test ends.
func startMember(t testing.TB, id string, opts ...swim.Option) *member {
	t.Helper()
	return startMemberAt(t, id, "127.0.0.1:0", opts...)
}

// newDiscovery returns a Discovery made with opts, which must be valid.
func newDiscovery(t testing.TB, opts ...swim.Option) *swim.Discovery {
	t.Helper()
	d, err := swim.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// startMemberAt is startMember with the node's transport on listen.
func startMemberAt(t testing.TB, id, listen string, opts ...swim.Option) *member {
	t.Helper()
	return startServing(t, id, listen, patternOf(id), opts...)
}

// startServing is startMemberAt serving pattern: a replica of the member
// whose pattern it is.
func startServing(t testing.TB, id, listen, pattern string, opts ...swim.Option) *member {
	t.Helper()
	d := newDiscovery(t, append([]swim.Option{swim.WithBindAddr("127.0.0.1:0"), swim.WithPreset(swim.Fast), swim.WithLogger(testLogger(id))}, opts...)...)
	tr, err := tcp.New()
	if err != nil {
		t.Fatal(err)
	}
	n, err := runtime.New(
		runtime.WithID(id),
		runtime.WithTransport(tr),
		runtime.WithListen(listen),
		runtime.WithDiscovery(d),
		runtime.WithLogger(testLogger(id)),
	)
	if err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	t.Cleanup(func() { n.Close() })
	m := &member{id: id, n: n, d: d}
	if err := n.Add(pattern, func(ctx context.Context, r runtime.Request) (any, error) {
		return map[string]any{"id": id}, nil
	}); err != nil {
		t.Fatal(err)
	}
	return m
}

// startCluster starts size members; all but the first have the first as
// their seed.
func startCluster(t testing.TB, prefix string, size int, opts ...swim.Option) []*member {
	t.Helper()
	ms := []*member{startMember(t, prefix+"0", opts...)}
	seed := swim.WithSeeds(ms[0].d.GossipAddr())
	for i := 1; i < size; i++ {
		ms = append(ms, startMember(t, fmt.Sprintf("%s%d", prefix, i), append(opts, seed)...))
	}
	t.Cleanup(func() { closeAll(ms) }) // before each member's own cleanup
	return ms
}

// closeAll closes the members' nodes in parallel.
func closeAll(ms []*member) {
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(func() { m.n.Close() })
	}
	wg.Wait()
}

// waitRoutable waits until every node of from can route each pattern.
func waitRoutable(t testing.TB, from []*member, patterns ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Guard)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(from)*len(patterns))
	for _, m := range from {
		for _, p := range patterns {
			wg.Go(func() {
				if err := m.n.WaitFor(ctx, p); err != nil {
					errs <- fmt.Errorf("%s waiting for %q: %w", m.id, p, err)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// addEverywhere adds pattern to m, answering m's id, and waits until
// every member of ms routes it to m and gets m's answer.
func addEverywhere(t testing.TB, ms []*member, m *member, pattern string) {
	t.Helper()
	if err := m.n.Add(pattern, func(ctx context.Context, r runtime.Request) (any, error) {
		return map[string]any{"id": m.id}, nil
	}); err != nil {
		t.Fatal(err)
	}
	waitRoutable(t, ms, pattern)
	for _, from := range ms {
		callEventually(t, from, pattern, m.id)
	}
}

// call calls pattern from m and returns the id of the node that answered.
func call(ctx context.Context, m *member, pattern string) (string, error) {
	res, err := m.n.Act(ctx, pattern, map[string]any{})
	if err != nil {
		return "", err
	}
	var out struct{ ID string }
	if err := res.Decode(&out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// notFound says whether a call to pattern from m finds no handler.
func notFound(ctx context.Context, m *member, pattern string) bool {
	_, err := m.n.Act(ctx, pattern, map[string]any{})
	return runtime.CodeOf(err) == runtime.CodeNotFound
}

// callEventually calls pattern from m until it reaches the node want,
// failing the test after the guard. Calls can miss while membership
// settles: a member falsely declared dead on a loaded machine rejoins
// within a second.
func callEventually(t testing.TB, m *member, pattern, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Guard)
	defer cancel()
	for {
		if err := m.n.WaitFor(ctx, pattern); err != nil {
			t.Fatalf("%s waiting for %q: %v", m.id, pattern, err)
		}
		got, err := call(ctx, m, pattern)
		if err == nil && got == want {
			return
		}
		if err == nil || ctx.Err() != nil {
			t.Fatalf("%s calling %q: answered by %q, %v; want %q", m.id, pattern, got, err, want)
		}
		time.Sleep(5 * time.Millisecond) // a polling interval, not synchronisation
	}
}

// others is ms without m.
func others(ms []*member, m *member) []*member {
	var out []*member
	for _, o := range ms {
		if o != m {
			out = append(out, o)
		}
	}
	return out
}

// waitGone waits until no node of from routes pat, and returns how
// long that took.
func waitGone(t testing.TB, from []*member, pat string) time.Duration {
	t.Helper()
	p := pattern.MustParse(pat)
	// Out of routing: no longer in Patterns. (A node that crashed here only
	// stops gossiping, its transport answers: for a few seconds after its
	// death it would still take calls that no other node can.)
	return testwait.Within(t, testwait.Guard, pat+" still routed", func() bool {
		for _, m := range from {
			if routes(m.n, p) {
				return false
			}
		}
		return true
	})
}

// TestCluster forms a cluster of ten nodes (50 with WIZARD_LONG=1), each seeded with the first,
// and follows it through changes: every node's pattern becomes routable
// on every other node and calls land on the node that serves it; a
// pattern added at run time spreads, and leaves when removed; a node
// that leaves, and one that crashes (stops gossiping without leaving),
// leave routing everywhere; a crashed node restarted under its id, on a
// new address or on its old one, serves again.
func TestCluster(t *testing.T) {
	leak.Check(t)
	top := t // nodes started in subtests live as long as the cluster
	ms := startCluster(t, "c", clusterSize())
	for _, m := range ms {
		waitRoutable(t, ms, m.pattern())
	}
	t.Run("calls", func(t *testing.T) {
		for _, from := range ms {
			for _, to := range ms {
				callEventually(t, from, to.pattern(), to.id)
			}
		}
	})

	t.Run("added at run time", func(t *testing.T) {
		m := ms[3]
		const added = "role:swimtest,added:yes"
		addEverywhere(t, ms, m, added)
		if _, err := m.n.Remove(added); err != nil {
			t.Fatal(err)
		}
		waitGone(t, ms, added)
	})

	live := ms
	t.Run("left", func(t *testing.T) {
		m := live[len(live)-1]
		live = others(live, m)
		if err := m.n.Close(); err != nil {
			t.Fatal(err)
		}
		took := waitGone(t, live, m.pattern())
		t.Logf("a node that left was out of routing on %d nodes after %v", len(live), took)
	})

	t.Run("crashed", func(t *testing.T) {
		m := live[len(live)-1]
		live = others(live, m)
		nominal := swim.Fast.SuspicionTimeout(len(live) + 1)
		start := time.Now()
		m.d.Crash() // its transport still answers: only gossip can tell
		took := waitGone(t, live, m.pattern())
		t.Logf("a crashed node was out of routing on %d nodes after %v (suspicion timeout %v)", len(live), took, nominal)
		// The suspicion timeout is nominal; it stretches up to 3x
		// (SuspicionMaxTimeoutMult) until other members confirm the
		// suspicion.
		if limit := 3*nominal + time.Second; took > limit {
			t.Errorf("removal took %v, over %v", took, limit)
		}
		if time.Since(start) < nominal {
			t.Errorf("removed after %v, before the suspicion timeout %v", took, nominal)
		}
		m.n.Close()

		t.Run("restarted on a new address", func(t *testing.T) {
			r := startMember(top, m.id, swim.WithSeeds(live[0].d.GossipAddr()))
			waitRoutable(t, live, r.pattern())
			for _, from := range live {
				callEventually(t, from, r.pattern(), r.id)
			}
			live = append(live, r)
		})
	})

	t.Run("restarted on its address", func(t *testing.T) {
		m := live[len(live)-2] // not the one restarted above
		live = others(live, m)
		addr := m.n.Addr()
		m.d.Crash()
		m.n.Close()
		// Back before the others declare the first run dead; its death,
		// when they do, must not take the new run out of routing.
		r := startMemberAt(top, m.id, addr, swim.WithSeeds(live[0].d.GossipAddr()))
		t.Cleanup(func() {
			if !t.Failed() {
				return
			}
			for _, o := range live {
				for _, x := range o.n.Members() {
					if x.Addr == addr && x.Patterns == 0 {
						t.Logf("%s sees %+v; the restarted node's digest is %s", o.id, x, r.n.Members()[0].Digest)
					}
				}
			}
		})
		waitRoutable(t, live, r.pattern())
		want := len(live) + 1
		testwait.Until(t, "the first run never declared dead", func() bool {
			for _, o := range live {
				if o.d.NumMembers() != want {
					return false
				}
			}
			return true
		})
		for _, from := range live {
			callEventually(t, from, r.pattern(), r.id)
			if notFound(t.Context(), from, r.pattern()) {
				t.Errorf("%s: the restarted node left routing", from.id)
			}
		}
	})
}
