package nats_test

import (
	"context"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/natstest"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/nats"
	"github.com/wizardmesh/wizard/runtime/swim"
)

// gossip returns a swim discovery on 127.0.0.1 seeded with seeds, with
// the fast timings, and the address it gossips on once started.
func gossip(t *testing.T, seeds ...string) *swim.Discovery {
	t.Helper()
	d, err := swim.New(swim.WithBindAddr("127.0.0.1:0"), swim.WithSeeds(seeds...), swim.WithInsecure(), swim.WithPreset(swim.Fast))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// bothNode starts a node of the broker at url, listening on a subject of
// its own and serving pattern, found both through NATS discovery and
// through gossip (sw); it returns the NATS discovery too.
func bothNode(t *testing.T, url string, sw *swim.Discovery, pattern string) (*runtime.Node, *nats.Discovery) {
	t.Helper()
	tr := newTransport(t, url)
	nd, err := nats.NewDiscovery(tr, nats.WithHeartbeat(heartbeat, deadAfter))
	if err != nil {
		t.Fatal(err)
	}
	d, err := discovery.Multi(nd, sw)
	if err != nil {
		t.Fatal(err)
	}
	n := transporttest.NewNode(t, runtime.WithTransport(tr), runtime.WithListen(":0"), runtime.WithDiscovery(d))
	transporttest.MustAdd(t, n, pattern, func(ctx context.Context, r runtime.Request) (any, error) { return pattern, nil })
	return n, nd
}

// TestSwimBesideNATSDiscovery: nodes on the NATS transport that run
// gossip (runtime/swim) beside NATS discovery on the same node, through
// discovery.Multi, are found by a node that only gossips and by
// one that only listens to the broker, and call each other. A node that
// stops announcing on the broker but still gossips stays routed where
// gossip reaches; when it leaves, both ways of finding it report it gone
// and every node drops its patterns, while the other stays routed.
func TestSwimBesideNATSDiscovery(t *testing.T) {
	b := natstest.Start(t)
	swA := gossip(t)
	a, _ := bothNode(t, b.URL(), swA, "role:a")
	bn, bnNATS := bothNode(t, b.URL(), gossip(t, swA.GossipAddr()), "role:b")

	// Only gossip: it knows a's gossip address, not the broker's
	// discovery subject.
	gossipOnly := transporttest.NewNode(t, runtime.WithTransport(newTransport(t, b.URL())), runtime.WithListen(":0"), runtime.WithDiscovery(gossip(t, swA.GossipAddr())))
	// Only the broker.
	natsOnly := meshNode(t, b.URL(), runtime.WithListen(""))

	callers := map[string]*runtime.Node{"a": a, "b": bn, "gossip-only": gossipOnly, "nats-only": natsOnly}
	for name, n := range callers {
		for _, p := range []string{"role:a", "role:b"} {
			if name == p[len("role:"):] {
				continue // its own
			}
			transporttest.WaitRoutable(t, n, p)
			res, err := n.ActE(t.Context(), p, nil)
			if err != nil || res.Value() != p {
				t.Errorf("%s calls %s: %v, %v", name, p, res.Value(), err)
			}
		}
	}
	// b stops announcing on the broker (says it leaves there) but still
	// gossips: the node that only listens to the broker drops it, a (which
	// gossips too) keeps calling it.
	if err := bnNATS.Close(); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "nats-only drops role:b", func() bool { return !transporttest.Routes(natsOnly, "role:b") })
	if !transporttest.Routes(a, "role:b") {
		t.Error("a dropped role:b, still gossiped")
	}
	if res, err := a.ActE(t.Context(), "role:b", nil); err != nil || res.Value() != "role:b" {
		t.Errorf("a calls role:b, still gossiped: %v, %v", res.Value(), err)
	}
	if !transporttest.Routes(gossipOnly, "role:b") {
		t.Error("gossip-only dropped role:b, still gossiped")
	}
	if err := bn.Close(); err != nil {
		t.Fatal(err)
	}
	for name, n := range callers {
		if name == "b" {
			continue
		}
		testwait.Until(t, name+" drops role:b", func() bool { return !transporttest.Routes(n, "role:b") })
		if name != "a" && !transporttest.Routes(n, "role:a") {
			t.Errorf("%s dropped role:a too", name)
		}
	}
}
