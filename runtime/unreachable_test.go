package runtime

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/wizardmesh/wizard/runtime/discovery"
)

// TestListPeers: errors name the first few peers and count the others.
func TestListPeers(t *testing.T) {
	st := func(name, why string) peerState { return peerState{name: name, why: why} }
	tests := []struct {
		name   string
		states []peerState
		want   string
	}{
		{"none", nil, ""},
		{"one", []peerState{st("a:1", "connection refused")}, "a:1 (connection refused)"},
		{"no reason", []peerState{st("a:1", ""), st("b:1", "x")}, "a:1, b:1 (x)"},
		{"more", []peerState{st("a", "1"), st("b", "2"), st("c", "3"), st("d", "4"), st("e", "5")}, "a (1), b (2), c (3) and 2 more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, listPeers(tt.states)); diff != "" {
				t.Errorf("listPeers (-want +got):\n%s", diff)
			}
		})
	}
	long := strings.Repeat("é", maxErrEcho)
	if got := clip(long, maxErrEcho); len(got) > maxErrEcho+len("…") || !strings.HasSuffix(got, "…") || !strings.HasPrefix(long, strings.TrimSuffix(got, "…")) {
		t.Errorf("clip: %q", got)
	}
}

// TestNoTargetConnected: a pattern whose every peer in routing has lost
// its connection is unavailable, naming the peers and why.
func TestNoTargetConnected(t *testing.T) {
	net := newMemNet()
	_, _ = memNode(t, net, "s", "role:r")
	c, d := memNode(t, net, "c")
	d.host.PeerUp(discovery.Peer{Addr: "s"})
	waitRoute(t, c, "role:r", "s")
	c.remote.mu.Lock()
	p := c.remote.peers["s"]
	c.remote.mu.Unlock()
	// The moment between a connection's end and its peer's patterns
	// leaving routing, held: routed, not connected, a dial failed.
	box := p.conn.Swap(nil)
	defer p.conn.Store(box)
	why := "connect: connection refused"
	p.dialErr.Store(&why)
	defer p.dialErr.Store(nil)
	_, err := c.ActE(t.Context(), "role:r", nil)
	if CodeOf(err) != CodeUnavailable || !strings.Contains(err.Error(), "s at s (connect: connection refused)") {
		t.Errorf("%v: want unavailable naming the peer and its dial error", err)
	}
}
