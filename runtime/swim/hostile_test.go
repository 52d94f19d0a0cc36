package swim_test

import (
	"context"
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

// claimHost is the host side of a gossip member that is no wizard node: it
// announces whatever self says, and ignores the others.
type claimHost struct{ self discovery.Peer }

func (h claimHost) Self() discovery.Peer    { return h.self }
func (h claimHost) PeerUp(discovery.Peer)   {}
func (h claimHost) PeerDown(discovery.Peer) {}

type serverFunc func(ctx context.Context, m *runtime.Message) *runtime.Message

func (f serverFunc) ServeMessage(ctx context.Context, m *runtime.Message) *runtime.Message {
	return f(ctx, m)
}

// TestHostileMemberGetsNoCalls: a gossip member announces, at an address
// of its own, the digest of a service the caller has routed, and takes
// connections there without ever answering a catalog pull. The caller
// dials it (its connection pends on the catalog pull), and routes it no
// call.
func TestHostileMemberGetsNoCalls(t *testing.T) {
	leak.Check(t)
	svc := startMember(t, "svc")
	cl := startMember(t, "cl", swim.WithSeeds(svc.d.GossipAddr()))
	t.Cleanup(func() { closeAll([]*member{svc, cl}) })
	waitRoutable(t, []*member{cl}, svc.pattern())

	tr, err := tcp.New()
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	l, err := tr.Listen("127.0.0.1:0", serverFunc(func(ctx context.Context, m *runtime.Message) *runtime.Message {
		if m.Pattern != introspect.CatalogPattern {
			calls.Add(1)
		}
		<-ctx.Done() // never answers
		return &runtime.Message{Code: runtime.CodeUnavailable, Error: "no"}
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	evil := newDiscovery(t, swim.WithBindAddr("127.0.0.1:0"), swim.WithPreset(swim.Fast), swim.WithSeeds(svc.d.GossipAddr()))
	if err := evil.Start(claimHost{discovery.Peer{ID: "evil", Instance: "e1", Addr: l.Addr(), Transport: "tcp", Digest: svc.n.Members()[0].Digest}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { evil.Close() })

	routedToEvil := func() bool {
		for _, pi := range cl.n.Patterns() {
			for _, r := range pi.Remote {
				if r == "evil" {
					return true
				}
			}
		}
		return false
	}
	// Connected comes before routed (a caller that sees a peer's patterns
	// finds its connection); the old code routed the cached patterns then.
	testwait.Until(t, "the caller connects to the hostile member", func() bool {
		for _, m := range cl.n.Members() {
			if m.Addr == l.Addr() && m.Connected {
				return true
			}
		}
		return false
	})
	for i := range 50 {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		got, err := call(ctx, cl, svc.pattern())
		cancel()
		if err != nil || got != "svc" {
			t.Fatalf("call %d: answered by %q, %v; want svc", i, got, err)
		}
	}
	if routedToEvil() {
		t.Errorf("the hostile member is routed: %v", cl.n.Patterns())
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the hostile member got %d calls", n)
	}
}
