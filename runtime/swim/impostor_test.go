package swim_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/swim"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// impostor is a gossip member that announces another node's digest at an
// address of its own, relays that node's catalog (so every catalog pull
// it gets is answered by the real node, with the real node's id and
// instance), and answers every other call itself.
type impostor struct {
	addr  string
	calls atomic.Int32 // calls it served, catalog pulls aside
	d     *swim.Discovery
}

// startImpostor starts an impostor of real, announced under id and
// instance, gossiping with seed.
func startImpostor(t *testing.T, real *member, id, instance, seed string) *impostor {
	t.Helper()
	tr, err := tcp.New()
	if err != nil {
		t.Fatal(err)
	}
	relay, err := tr.Dial(t.Context(), real.n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close() })
	im := &impostor{}
	l, err := tr.Listen("127.0.0.1:0", serverFunc(func(ctx context.Context, m *runtime.Message) *runtime.Message {
		if m.Pattern == runtime.CatalogPattern {
			reply, err := relay.Call(ctx, &runtime.Message{Pattern: m.Pattern, Meta: m.Meta, Codec: m.Codec, Payload: m.Payload})
			if err != nil {
				return &runtime.Message{Code: runtime.CodeUnavailable, Error: err.Error()}
			}
			return reply
		}
		im.calls.Add(1)
		b, _ := json.Marshal(map[string]string{"id": "impostor"})
		return &runtime.Message{Codec: runtime.CodecJSON, Payload: b}
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	im.addr = l.Addr()
	im.d = newDiscovery(t, swim.WithBindAddr("127.0.0.1:0"), swim.WithPreset(swim.Fast), swim.WithSeeds(seed))
	self := runtime.Peer{ID: id, Instance: instance, Addr: im.addr, Transport: "tcp", Digest: real.n.Members()[0].Digest}
	if err := im.d.Start(claimHost{self}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.d.Close() })
	return im
}

// record returns what n knows of the member at addr, if anything.
func record(n *runtime.Node, addr string) (runtime.Member, bool) {
	for _, m := range n.Members() {
		if m.Addr == addr {
			return m, true
		}
	}
	return runtime.Member{}, false
}

// TestImpostorGetsNoCalls: a gossip member announces, at an address of
// its own, the digest of a node the caller has routed, and relays that
// node's catalog, under its own id or under the real node's id with
// another instance. The answer on its connection states an id or an
// instance other than the one it was announced under: the caller routes
// it no call. When it leaves gossip, no record of it stays (none of the
// real node at its address).
func TestImpostorGetsNoCalls(t *testing.T) {
	for _, tc := range []struct{ name, id, instance string }{
		{"another id", "impostor", "i1"},
		{"same id another instance", "svc", "i1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leak.Check(t)
			svc := startMember(t, "svc")
			cl := startMember(t, "cl", swim.WithSeeds(svc.d.GossipAddr()))
			t.Cleanup(func() { closeAll([]*member{svc, cl}) })
			waitRoutable(t, []*member{cl}, svc.pattern())

			im := startImpostor(t, svc, tc.id, tc.instance, svc.d.GossipAddr())
			// Either routed (its patterns counted) or turned away (a reason
			// given): the caller has pulled its catalog.
			testwait.Until(t, "the caller pulls the impostor's catalog", func() bool {
				m, ok := record(cl.n, im.addr)
				return ok && (m.Patterns > 0 || m.LastError != "")
			})
			served := map[string]int{}
			for i := range 100 {
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
				got, err := call(ctx, cl, svc.pattern())
				cancel()
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				served[got]++
			}
			if n := im.calls.Load(); n != 0 || served["svc"] != 100 {
				t.Errorf("the impostor served %d of 100 calls (answers: %v); want 0", n, served)
			}
			m, _ := record(cl.n, im.addr)
			if m.ID == "svc" && tc.id != "svc" || m.Patterns != 0 || m.Connected {
				t.Errorf("the impostor's record: %+v; want its own id, unrouted, unconnected", m)
			}

			im.d.Close()
			testwait.Within(t, 10*time.Second, "a record of the impostor stays after it left", func() bool {
				_, ok := record(cl.n, im.addr)
				return !ok
			})
			for range 20 {
				if got, err := call(t.Context(), cl, svc.pattern()); err != nil || got != "svc" {
					t.Fatalf("after the impostor left: answered by %q, %v; want svc", got, err)
				}
			}
			if n := im.calls.Load(); n != 0 {
				t.Errorf("the impostor served %d calls in all; want 0", n)
			}
		})
	}
}
