package swim_test

import (
	"context"
	"strings"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/introspect"
	"github.com/wizardmesh/wizard/runtime/quic"
	"github.com/wizardmesh/wizard/runtime/swim"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// TestTCPCallerInQUICMesh (issue 13): a TCP node that joins a QUIC mesh
// by gossip is told of a peer it cannot call. It warns once, however
// often gossip reports the peer, lists it in Members as on quic and not
// connected, and a call to its pattern is unavailable naming it and its
// transport, not not_found as for a pattern nobody serves.
func TestTCPCallerInQUICMesh(t *testing.T) {
	const pattern = "role:inventory,cmd:get_item"
	qtr, err := quic.New(quic.WithInsecureSelfSigned())
	if err != nil {
		t.Fatal(err)
	}
	d := newDiscovery(t, swim.WithBindAddr("127.0.0.1:0"), swim.WithPreset(swim.Fast), swim.WithLogger(testLogger("quic")))
	srv, err := runtime.New(runtime.WithID("inventory-1"), runtime.WithTransport(qtr), runtime.WithListen("127.0.0.1:0"),
		runtime.WithDiscovery(d), runtime.WithLogger(testLogger("quic")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if err := srv.Add(pattern, func(ctx context.Context, r runtime.Request) (any, error) { return "item", nil }); err != nil {
		t.Fatal(err)
	}

	var logs testlog.Buffer
	tr, err := tcp.New()
	if err != nil {
		t.Fatal(err)
	}
	cd := newDiscovery(t, swim.WithBindAddr("127.0.0.1:0"), swim.WithPreset(swim.Fast), swim.WithSeeds(d.GossipAddr()), swim.WithLogger(testLogger("tcp")))
	cl, err := runtime.New(runtime.WithID("caller"), runtime.WithTransport(tr), runtime.WithDiscovery(cd), runtime.WithLogger(logs.Logger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })

	quicPeer := func() (introspect.Member, bool) {
		for _, m := range cl.Members() {
			if m.Addr == srv.Addr() {
				return m, true
			}
		}
		return introspect.Member{}, false
	}
	testwait.Until(t, "the caller learns of the QUIC peer", func() bool { _, ok := quicPeer(); return ok })
	// Gossip reports the peer again when its pattern set changes.
	digest := func() string { m, _ := quicPeer(); return m.Digest }
	before := digest()
	if err := srv.Add("role:inventory,cmd:list", func(ctx context.Context, r runtime.Request) (any, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "gossip reports the peer's new digest", func() bool { return digest() != before })

	m, _ := quicPeer()
	if m.ID != "inventory-1" || m.Transport != "quic" || m.Connected || !strings.Contains(m.LastError, "quic") {
		t.Errorf("Members: %+v, want inventory-1 on quic, not connected", m)
	}
	if n := strings.Count(logs.String(), "level=WARN msg=\"wizard: peer on another transport"); n != 1 {
		t.Errorf("%d warnings of the peer on another transport, want 1:\n%s", n, logs.String())
	}
	_, err = cl.ActE(t.Context(), pattern, nil)
	if runtime.CodeOf(err) != runtime.CodeUnavailable || !strings.Contains(err.Error(), srv.Addr()) || !strings.Contains(err.Error(), "quic") {
		t.Errorf("call: %v, want unavailable naming the QUIC peer", err)
	}
	t.Log(err)
}
