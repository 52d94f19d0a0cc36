package runtime

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/introspect"
)

const warnedMisidentified = "level=WARN msg=\"wizard: peer not routed: it answers as another node"

// TestRestartRoutedAtOnce: a node restarted on its address answers its
// caller's redial before discovery announces its new run. It proves the
// id announced there: it is routed at once, without a warning.
func TestRestartRoutedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net, s, c, d, logs := announcedPair(t)

		s.Close()
		s2, _ := memNode(t, net, "s", "role:r")
		time.Sleep(time.Second) // past the redial
		synctest.Wait()
		waitRoute(t, c, "role:r", "s")
		if ms := c.Members(); len(ms) != 2 || ms[1].ID != "s" || !ms[1].Connected {
			t.Errorf("Members() = %+v, want s connected", ms)
		}
		d.host.PeerUp(discovery.Peer{ID: "s", Instance: s2.instance, Addr: "s", Digest: s2.digest()})
		synctest.Wait()
		if res, err := c.ActE(t.Context(), "role:r", nil); err != nil || res.Value() != "s" {
			t.Errorf("the new run: %v, %v", res.Value(), err)
		}
		if strings.Contains(logs.String(), warnedMisidentified) {
			t.Errorf("a restart was warned of:\n%s", logs.String())
		}
	})
}

// TestImpostorOfARunNotRouted: a member announced under the id of a node
// the caller routes, with an instance of its own, relays that node's
// catalog, so its connection answers as the node's run, not as the one
// announced but as one announced at another address. It gets no call,
// and is warned of once.
func TestImpostorOfARunNotRouted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net, s, c, d, logs := announcedPair(t)

		net.serve("h", serverFunc(func(ctx context.Context, m *Message) *Message {
			if m.Pattern == introspect.CatalogPattern {
				return s.serveRemote(ctx, m)
			}
			return &Message{Codec: CodecJSON, Payload: []byte(`"h"`)}
		}))
		claim := discovery.Peer{ID: "s", Instance: "x", Addr: "h", Digest: s.digest()}
		d.host.PeerUp(claim)
		time.Sleep(catalogJitter)
		synctest.Wait()
		claim.Suspect = true
		d.host.PeerUp(claim) // discovery repeating itself
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := strings.Count(logs.String(), warnedMisidentified); got != 1 {
			t.Errorf("warned of %d times, want once:\n%s", got, logs.String())
		}
		for range 20 {
			if res, err := c.ActE(t.Context(), "role:r", nil); err != nil || res.Value() != "s" {
				t.Fatalf("role:r: %v, %v; want s's answer", res.Value(), err)
			}
		}
		if got := net.count(net.calls, "h"); got != 0 {
			t.Errorf("the impostor got %d calls", got)
		}
		waitRoute(t, c, "role:r", "s")
	})
}

// TestImpostorAnnouncedFirst: the impostor of a run is announced before
// the node it relays, so at first it looks like a new run of the id
// announced at its address, and is routed. Once the node is announced at
// its own address, the impostor is asked again, no longer routed, and
// gets no further call.
func TestImpostorAnnouncedFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs testlog.Buffer
		net := newMemNet()
		s, _ := memNode(t, net, "s", "role:r")
		c, d := memNode(t, net, "c")
		c.log = logs.Logger()
		net.serve("h", serverFunc(func(ctx context.Context, m *Message) *Message {
			if m.Pattern == introspect.CatalogPattern {
				return s.serveRemote(ctx, m)
			}
			return &Message{Codec: CodecJSON, Payload: []byte(`"h"`)}
		}))
		d.host.PeerUp(discovery.Peer{ID: "s", Instance: "x", Addr: "h", Digest: s.digest()})
		time.Sleep(catalogJitter)
		synctest.Wait()
		waitRoute(t, c, "role:r", "s") // h, under the id it relays

		d.host.PeerUp(discovery.Peer{ID: "s", Instance: s.instance, Addr: "s", Digest: s.digest()})
		time.Sleep(catalogJitter)
		synctest.Wait()
		waitRoute(t, c, "role:r", "s")
		if ms := c.Members(); len(ms) != 3 || ms[1].Addr != "h" || ms[1].Connected || ms[1].Patterns != 0 {
			t.Errorf("Members() = %+v, want h listed, not connected, unrouted", ms)
		}
		before := net.count(net.calls, "h")
		for range 20 {
			if res, err := c.ActE(t.Context(), "role:r", nil); err != nil || res.Value() != "s" {
				t.Fatalf("role:r: %v, %v; want s's answer", res.Value(), err)
			}
		}
		if got := net.count(net.calls, "h") - before; got != 0 {
			t.Errorf("the impostor got %d calls once the node it relays was announced", got)
		}
		if got := strings.Count(logs.String(), warnedMisidentified); got != 1 {
			t.Errorf("warned of %d times, want once:\n%s", got, logs.String())
		}
	})
}

// announcedPair is a node s serving role:r, announced to a caller c by
// its discovery d under its id and run, and routed; c logs to logs.
func announcedPair(t *testing.T) (*memNet, *Node, *Node, *hostDiscovery, *testlog.Buffer) {
	t.Helper()
	logs := new(testlog.Buffer)
	net := newMemNet()
	s, _ := memNode(t, net, "s", "role:r")
	c, d := memNode(t, net, "c")
	c.log = logs.Logger()
	d.host.PeerUp(discovery.Peer{ID: "s", Instance: s.instance, Addr: "s", Digest: s.digest()})
	synctest.Wait()
	waitRoute(t, c, "role:r", "s")
	return net, s, c, d, logs
}
