package swim_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/introspect"
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
		if m.Pattern == introspect.CatalogPattern {
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
	self := discovery.Peer{ID: id, Instance: instance, Addr: im.addr, Transport: "tcp", Digest: real.n.Members()[0].Digest}
	if err := im.d.Start(claimHost{self}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.d.Close() })
	return im
}

// record returns what n knows of the member at addr, if anything.
func record(n *runtime.Node, addr string) (introspect.Member, bool) {
	for _, m := range n.Members() {
		if m.Addr == addr {
			return m, true
		}
	}
	return introspect.Member{}, false
}

// impostorCases are the two ways an impostor is announced: under an id of
// its own, or under the real node's id with an instance of its own.
var impostorCases = []struct{ name, id, instance string }{
	{"another id", "impostor", "i1"},
	{"same id another instance", "svc", "i1"},
}

// startImpostorOf starts svc, a caller cl that routes svc, and an
// impostor of svc announced under id and instance, once cl has pulled
// the impostor's catalog (and routed it, or turned it away).
func startImpostorOf(t *testing.T, id, instance string) (svc, cl *member, im *impostor) {
	t.Helper()
	svc = startMember(t, "svc")
	cl = startMember(t, "cl", swim.WithSeeds(svc.d.GossipAddr()))
	t.Cleanup(func() { closeAll([]*member{svc, cl}) })
	waitRoutable(t, []*member{cl}, svc.pattern())
	im = startImpostor(t, svc, id, instance, svc.d.GossipAddr())
	testwait.Until(t, "the caller pulls the impostor's catalog", func() bool {
		m, ok := record(cl.n, im.addr)
		return ok && (m.Patterns > 0 || m.LastError != "")
	})
	return svc, cl, im
}

// callSvc makes calls calls from cl to svc's pattern and counts the
// answers by who gave them.
func callSvc(t *testing.T, cl, svc *member, calls int) map[string]int {
	t.Helper()
	served := map[string]int{}
	for i := range calls {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		got, err := call(ctx, cl, svc.pattern())
		cancel()
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		served[got]++
	}
	return served
}

// TestImpostorGetsNoCalls: a gossip member announces, at an address of
// its own, the digest of a node the caller has routed, and relays that
// node's catalog, under its own id or under the real node's id with
// another instance. Its connection answers as the real node, not as the
// node announced there: the caller routes it no call, and lists it under
// the id it was announced with, not connected, saying why.
func TestImpostorGetsNoCalls(t *testing.T) {
	for _, tc := range impostorCases {
		t.Run(tc.name, func(t *testing.T) {
			leak.Check(t)
			svc, cl, im := startImpostorOf(t, tc.id, tc.instance)
			served := callSvc(t, cl, svc, 100)
			if n := im.calls.Load(); n != 0 || served["svc"] != 100 {
				t.Errorf("the impostor served %d of 100 calls (answers: %v); want 0", n, served)
			}
			m, _ := record(cl.n, im.addr)
			if m.ID != tc.id || m.Patterns != 0 || m.Connected || !strings.Contains(m.LastError, "answers as") {
				t.Errorf("the impostor's record: %+v; want its announced id %s, unrouted, unconnected, saying why", m, tc.id)
			}
		})
	}
}

// TestImpostorLeavesNoRecord: when such an impostor leaves gossip (its
// listener still up), the caller keeps no record of it, under any id,
// and it gets no call.
func TestImpostorLeavesNoRecord(t *testing.T) {
	for _, tc := range impostorCases {
		t.Run(tc.name, func(t *testing.T) {
			leak.Check(t)
			svc, cl, im := startImpostorOf(t, tc.id, tc.instance)
			before := im.calls.Load()
			im.d.Close()
			testwait.Within(t, 10*time.Second, "a record of the impostor stays after it left", func() bool {
				_, ok := record(cl.n, im.addr)
				return !ok
			})
			served := callSvc(t, cl, svc, 50)
			if n := im.calls.Load() - before; n != 0 || served["svc"] != 50 {
				t.Errorf("after it left, the impostor served %d of 50 calls (answers: %v); want 0", n, served)
			}
		})
	}
}
