package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/link"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// counter counts the events each (group, id) pair received.
type counter struct {
	mu   sync.Mutex
	seen map[string]int // "group/id" -> runs
	runs atomic.Int64
}

func newCounter() *counter { return &counter{seen: map[string]int{}} }

func (c *counter) handler(group string) runtime.Handler {
	return func(ctx context.Context, req runtime.Request) (any, error) {
		id, _ := req.String("id")
		if g := req.Group(); g != group {
			return nil, fmt.Errorf("Request.Group() = %q, want %q", g, group)
		}
		c.mu.Lock()
		c.seen[group+"/"+id]++
		c.mu.Unlock()
		c.runs.Add(1)
		return nil, nil
	}
}

func (c *counter) count(group, id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[group+"/"+id]
}

func TestEmitInProcess(t *testing.T) {
	n := newTestNode(t, runtime.WithService("orders"))
	c := newCounter()
	for _, g := range []string{"billing", "shipping"} {
		if err := n.Subscribe("role:order,event:placed", g, c.handler(g)); err != nil {
			t.Fatal(err)
		}
	}
	// A wider subscription of billing matches too: both of billing's run.
	var wide atomic.Int64
	if err := n.Subscribe("role:order", "billing", func(ctx context.Context, req runtime.Request) (any, error) {
		wide.Add(1)
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	d, err := n.Emit(t.Context(), "role:order,event:placed", map[string]any{"id": "1"})
	if err != nil {
		t.Fatalf("Emit: %v", err)
	}
	if !slices.Equal(sorted(d.Took), []string{"billing", "shipping"}) || len(d.Missed) != 0 {
		t.Errorf("Emit delivery = %+v, want Took billing and shipping", d)
	}
	if c.count("billing", "1") != 1 || c.count("shipping", "1") != 1 || wide.Load() != 1 {
		t.Errorf("runs: billing %d, shipping %d, billing's role:order %d; want 1 each", c.count("billing", "1"), c.count("shipping", "1"), wide.Load())
	}
	// An event of another kind reaches billing's wide subscription alone.
	d, err = n.Emit(t.Context(), "role:order,event:cancelled", map[string]any{"id": "2"})
	if err != nil || !slices.Equal(d.Took, []string{"billing"}) || wide.Load() != 2 {
		t.Errorf("Emit(event:cancelled) = %+v, %v (wide runs %d); want billing alone", d, err, wide.Load())
	}
	// Nobody listens: reported, not lost in silence.
	_, err = n.Emit(t.Context(), "role:user,event:created", nil)
	if runtime.CodeOf(err) != runtime.CodeNotFound || !errors.Is(err, runtime.ErrNoHandler) || !strings.Contains(err.Error(), "no subscription matches") {
		t.Errorf("Emit with no subscriber: %v; want not_found naming no subscription", err)
	}
}

func TestSubscribeRefuses(t *testing.T) {
	n := newTestNode(t)
	h := func(ctx context.Context, req runtime.Request) (any, error) { return nil, nil }
	for _, tc := range []struct {
		pattern, group string
		h              runtime.Handler
		want           string
	}{
		{"role:a", "", nil, "nil handler"},
		{"role:a,wizard.group:x", "g", h, "reserved"},
		{"role:a,sys:wizard", "g", h, "node's own"},
		{"role:a", "two words", h, "space"},
		{"role:a", strings.Repeat("g", 200), h, "more than 128"},
		{"role:a", "g", runtime.NewStreamHandler(func(ctx context.Context, s *runtime.ServerStream[any, any]) error { return nil }), "stream handler"},
	} {
		err := n.Subscribe(tc.pattern, tc.group, tc.h)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Subscribe(%q, %q) = %v; want an error saying %q", tc.pattern, tc.group, err, tc.want)
		}
	}
	if err := n.Subscribe("role:a", "g", h); err != nil {
		t.Fatal(err)
	}
	if err := n.Subscribe("role:a", "g", h); runtime.CodeOf(err) != runtime.CodeAlreadyExists {
		t.Errorf("subscribing twice: %v; want already_exists", err)
	}
	if err := n.Subscribe("role:a", "g", h, runtime.Override()); err != nil {
		t.Errorf("Override: %v", err)
	}
	if ok, err := n.Unsubscribe("role:a", "g"); !ok || err != nil {
		t.Errorf("Unsubscribe = %v, %v", ok, err)
	}
	if _, err := n.Emit(t.Context(), "role:a", nil); runtime.CodeOf(err) != runtime.CodeNotFound {
		t.Errorf("Emit after Unsubscribe: %v; want not_found", err)
	}
	if _, err := runtime.New(runtime.WithService("a b")); err == nil || !strings.Contains(err.Error(), "WithService") {
		t.Errorf("New(WithService(\"a b\")) = %v; want an error naming the option", err)
	}
}

// eventMesh is members of groups, each a TCP node, and an emitter that
// finds them through StaticPeers (through a link each, which a test can
// take down).
type eventMesh struct {
	emitter *runtime.Node
	members map[string][]*runtime.Node // by group
	links   map[*runtime.Node]link.Link
	c       *counter
}

func newEventMesh(t *testing.T, groups []string, per int, pattern string) *eventMesh {
	t.Helper()
	m := &eventMesh{members: map[string][]*runtime.Node{}, links: map[*runtime.Node]link.Link{}, c: newCounter()}
	var addrs []string
	for _, g := range groups {
		for i := range per {
			tr, err := tcp.New()
			if err != nil {
				t.Fatal(err)
			}
			n := newTestNode(t, runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"), runtime.WithID(fmt.Sprintf("%s-%d", g, i)), runtime.WithService(g))
			if err := n.Subscribe(pattern, "", m.c.handler(g)); err != nil {
				t.Fatal(err)
			}
			l := link.TCP(t, n.Addr())
			m.links[n] = l
			addrs = append(addrs, l.Addr())
			m.members[g] = append(m.members[g], n)
		}
	}
	tr, err := tcp.New()
	if err != nil {
		t.Fatal(err)
	}
	m.emitter = newTestNode(t, runtime.WithTransport(tr), runtime.WithDiscovery(runtime.StaticPeers(addrs...)))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := m.emitter.WaitForSubscribers(ctx, pattern, groups...); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestEmitGroupsOverTCP(t *testing.T) {
	groups := []string{"billing", "shipping", "mail"}
	m := newEventMesh(t, groups, 3, "role:order,event:placed")
	// Wait until every member's subscription is routed, so that the
	// balancer spreads the events.
	waitMembers(t, m.emitter, "role:order,event:placed", 9)
	const events = 300
	for i := range events {
		d, err := m.emitter.Emit(t.Context(), "role:order,event:placed", map[string]any{"id": fmt.Sprint(i)})
		if err != nil {
			t.Fatalf("Emit %d: %v", i, err)
		}
		if !slices.Equal(sorted(d.Took), sorted(groups)) {
			t.Fatalf("Emit %d took %v; want %v", i, d.Took, groups)
		}
	}
	for _, g := range groups {
		for i := range events {
			if k := m.c.count(g, fmt.Sprint(i)); k != 1 {
				t.Errorf("group %s ran event %d %d times; want once", g, i, k)
			}
		}
	}
	subs := m.emitter.Subscriptions()
	if len(subs) != 3 || subs[0].Group != "billing" || len(subs[0].Remote) != 3 || subs[0].Local || subs[0].Pattern.String() != "event:placed,role:order" {
		t.Errorf("Subscriptions() = %+v; want 3 groups of 3 remote members each", subs)
	}
	for _, mb := range m.emitter.Members()[1:] {
		if mb.Patterns != 0 {
			t.Errorf("member %s lists %d patterns; want 0 (it has subscriptions only)", mb.ID, mb.Patterns)
		}
	}
	// Broadcast: every member, once.
	d, err := m.emitter.Broadcast(t.Context(), "role:order,event:placed", map[string]any{"id": "all"})
	if err != nil || len(d.Took) != 9 {
		t.Fatalf("Broadcast = %+v, %v; want 9 nodes", d, err)
	}
	for _, g := range groups {
		if k := m.c.count(g, "all"); k != 3 {
			t.Errorf("broadcast ran %d times in group %s; want 3 (each member)", k, g)
		}
	}
}

// TestEmitMemberKilled takes a member of billing away mid-stream of
// events: each event runs at most once per group, and every event
// billing did not run is reported missed.
func TestEmitMemberKilled(t *testing.T) {
	groups := []string{"billing", "shipping"}
	m := newEventMesh(t, groups, 3, "role:order,event:placed")
	waitMembers(t, m.emitter, "role:order,event:placed", 6)
	const events = 400
	missed := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var next atomic.Int64
	// The victim holds every event it gets until it is killed: those are
	// lost after they were sent, and must be reported.
	victim := m.members["billing"][0]
	var held atomic.Int64
	if err := victim.Subscribe("role:order,event:placed", "", func(ctx context.Context, req runtime.Request) (any, error) {
		held.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	}, runtime.Override()); err != nil {
		t.Fatal(err)
	}
	for range 8 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= events {
					return
				}
				if i == events/4 {
					m.links[victim].Down() // the member's connections cut...
					_ = victim.Close()     // ...and the member gone
				}
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				d, err := m.emitter.Emit(ctx, "role:order,event:placed", map[string]any{"id": fmt.Sprint(i)})
				cancel()
				if err != nil && len(d.Missed) == 0 {
					t.Errorf("Emit %d: %v with nothing missed", i, err)
				}
				mu.Lock()
				for _, g := range d.Missed {
					missed[g+"/"+fmt.Sprint(i)] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	lost := 0
	for _, g := range groups {
		for i := range events {
			k := m.c.count(g, fmt.Sprint(i))
			switch {
			case k > 1:
				t.Errorf("group %s ran event %d %d times", g, i, k)
			case k == 0 && !missed[g+"/"+fmt.Sprint(i)]:
				t.Errorf("group %s never ran event %d, and Emit did not report it missed", g, i)
			case k == 0:
				lost++
			}
		}
	}
	if lost == 0 || int64(lost) > held.Load() {
		t.Errorf("%d events missed; want some, at most the %d the victim held", lost, held.Load())
	}
	t.Logf("%d events x %d groups: %d held by the victim, %d missed and reported", events, len(groups), held.Load(), lost)
}

// waitMembers waits until the events of pattern have n members across
// their groups in node's routing.
func waitMembers(t *testing.T, node *runtime.Node, pattern string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := runtime.WaitForEventMembers(ctx, node, pattern, n); err != nil {
		t.Fatalf("waiting for %d members of %s: %v", n, pattern, err)
	}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

// BenchmarkEmit emits an event to one group's subscriber in the node
// itself, and to 1 and 3 groups of one TCP member each.
func BenchmarkEmit(b *testing.B) {
	nop := func(ctx context.Context, req runtime.Request) (any, error) { return nil, nil }
	msg := map[string]any{"id": "1", "total": 42}
	b.Run("in-process", func(b *testing.B) {
		n := newTestNode(b)
		if err := n.Subscribe("role:order,event:placed", "billing", nop); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := n.Emit(b.Context(), "role:order,event:placed", msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The baseline: a call of the same message to one TCP node.
	b.Run("tcp-act", func(b *testing.B) {
		tr, err := tcp.New()
		if err != nil {
			b.Fatal(err)
		}
		n := newTestNode(b, runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"))
		if err := n.Add("role:order,event:placed", nop); err != nil {
			b.Fatal(err)
		}
		tr2, err := tcp.New()
		if err != nil {
			b.Fatal(err)
		}
		c := newTestNode(b, runtime.WithTransport(tr2), runtime.WithDiscovery(runtime.StaticPeers(n.Addr())))
		if err := c.WaitFor(b.Context(), "role:order,event:placed"); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Act(b.Context(), "role:order,event:placed", msg); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	for _, groups := range []int{1, 3} {
		b.Run(fmt.Sprintf("tcp-%dgroups", groups), func(b *testing.B) {
			var addrs, names []string
			for g := range groups {
				tr, err := tcp.New()
				if err != nil {
					b.Fatal(err)
				}
				n := newTestNode(b, runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"))
				name := fmt.Sprint("g", g)
				if err := n.Subscribe("role:order,event:placed", name, nop); err != nil {
					b.Fatal(err)
				}
				addrs, names = append(addrs, n.Addr()), append(names, name)
			}
			tr, err := tcp.New()
			if err != nil {
				b.Fatal(err)
			}
			e := newTestNode(b, runtime.WithTransport(tr), runtime.WithDiscovery(runtime.StaticPeers(addrs...)))
			if err := e.WaitForSubscribers(b.Context(), "role:order,event:placed", names...); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := e.Emit(b.Context(), "role:order,event:placed", msg); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// attemptLog records the attempts an Observer sees.
type attemptLog struct {
	runtime.NopObserver
	mu  sync.Mutex
	got []runtime.Attempt
}

func (o *attemptLog) AttemptStart(ctx context.Context, a runtime.Attempt) context.Context {
	o.mu.Lock()
	o.got = append(o.got, a)
	o.mu.Unlock()
	return ctx
}

// TestEmitObserved: an Observer sees each delivery as an attempt with
// Event set, the event's pattern and the group.
func TestEmitObserved(t *testing.T) {
	tr, err := tcp.New()
	if err != nil {
		t.Fatal(err)
	}
	sub := newTestNode(t, runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"))
	if err := sub.Subscribe("role:order", "billing", func(ctx context.Context, req runtime.Request) (any, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	obs := &attemptLog{}
	tr2, err := tcp.New()
	if err != nil {
		t.Fatal(err)
	}
	e := newTestNode(t, runtime.WithTransport(tr2), runtime.WithDiscovery(runtime.StaticPeers(sub.Addr())), runtime.WithObserver(obs))
	if err := e.WaitForSubscribers(t.Context(), "role:order", "billing"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Emit(t.Context(), "role:order,event:placed", map[string]any{"id": "1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Broadcast(t.Context(), "role:order,event:placed", map[string]any{"id": "2"}); err != nil {
		t.Fatal(err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.got) != 2 {
		t.Fatalf("observed %d attempts; want 2", len(obs.got))
	}
	for i, want := range []string{"billing", ""} {
		a := obs.got[i]
		if !a.Event || a.Group != want || a.Pattern.String() != "role:order" {
			t.Errorf("attempt %d = Event %v, Group %q, Pattern %s; want an event to %q with the pairs its subscription tests", i, a.Event, a.Group, a.Pattern, want)
		}
	}
}

// TestEmitGroupFails: a group whose member's handler fails is missed,
// named with the handler's code; the others take the event.
func TestEmitGroupFails(t *testing.T) {
	m := newEventMesh(t, []string{"billing", "shipping"}, 1, "role:order")
	if err := m.members["shipping"][0].Subscribe("role:order", "", func(ctx context.Context, req runtime.Request) (any, error) {
		return nil, runtime.Errorf(runtime.CodeFailedPrecondition, "no address on the order")
	}, runtime.Override()); err != nil {
		t.Fatal(err)
	}
	d, err := m.emitter.Emit(t.Context(), "role:order,event:placed", map[string]any{"id": "1"})
	if !slices.Equal(d.Took, []string{"billing"}) || !slices.Equal(d.Missed, []string{"shipping"}) {
		t.Errorf("Emit = %+v; want billing took it, shipping missed it", d)
	}
	if runtime.CodeOf(err) != runtime.CodeFailedPrecondition || strings.Contains(err.Error(), groupKeyText) ||
		!strings.Contains(err.Error(), "1 of 2 groups missed it: shipping (failed_precondition: no address on the order)") {
		t.Errorf("Emit error = %v; want failed_precondition naming shipping and the handler's error, and not the catalog's group key", err)
	}
}

// TestEmitLongField: a message field no subscription tests may be longer
// than receivers let patterns be: it travels in the payload only.
func TestEmitLongField(t *testing.T) {
	m := newEventMesh(t, []string{"billing"}, 1, "role:order")
	long := strings.Repeat("x", 64<<10)
	d, err := m.emitter.Emit(t.Context(), "role:order,event:placed", map[string]any{"id": "1", "note": long})
	if err != nil || !slices.Equal(d.Took, []string{"billing"}) {
		t.Fatalf("Emit with a 64 KiB field = %+v, %v; want billing to take it", d, err)
	}
	if m.c.count("billing", "1") != 1 {
		t.Errorf("billing ran it %d times; want once", m.c.count("billing", "1"))
	}
}

// groupKeyText is the key subscriptions carry in catalogs, which no error
// a user reads should show.
const groupKeyText = "wizard.group"

// TestEmitIntercepted: each delivery goes through the call interceptors,
// named by its group; metadata an interceptor adds reaches the
// subscription, local or remote.
func TestEmitIntercepted(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	ic := func(next runtime.Invoker) runtime.Invoker {
		return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
			mu.Lock()
			seen = append(seen, fmt.Sprintf("%v %s %s", c.Event, c.Group, c.Pattern))
			mu.Unlock()
			return next(runtime.AppendMetadata(ctx, "x-trace", "t-"+c.Group), c)
		}
	}
	got := make(chan string, 2)
	sub := func(ctx context.Context, req runtime.Request) (any, error) {
		got <- req.Group() + "=" + runtime.IncomingMetadata(ctx).Get("x-trace")
		return nil, nil
	}
	tr, err := tcp.New()
	if err != nil {
		t.Fatal(err)
	}
	remote := newTestNode(t, runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"))
	if err := remote.Subscribe("role:order", "shipping", sub); err != nil {
		t.Fatal(err)
	}
	tr2, err := tcp.New()
	if err != nil {
		t.Fatal(err)
	}
	e := newTestNode(t, runtime.WithTransport(tr2), runtime.WithDiscovery(runtime.StaticPeers(remote.Addr())), runtime.WithCallInterceptors(ic))
	if err := e.Subscribe("role:order", "billing", sub); err != nil {
		t.Fatal(err)
	}
	if err := e.WaitForSubscribers(t.Context(), "role:order", "billing", "shipping"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Emit(t.Context(), "role:order,event:placed", map[string]any{"id": "1"}); err != nil {
		t.Fatal(err)
	}
	heard := sorted([]string{<-got, <-got})
	if !slices.Equal(heard, []string{"billing=t-billing", "shipping=t-shipping"}) {
		t.Errorf("subscriptions heard %v; want each its group's metadata", heard)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(sorted(seen), []string{"true billing event:placed,id:1,role:order", "true shipping role:order"}) {
		t.Errorf("interceptors saw %q", seen)
	}
}
