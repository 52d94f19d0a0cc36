package nats_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/natstest"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/nats"
)

const heartbeat, deadAfter = 50 * time.Millisecond, 400 * time.Millisecond

// meshNode starts a node of the broker at url that listens on a subject
// of its own (unless opts say otherwise) and finds the others through
// NATS discovery.
func meshNode(t *testing.T, url string, opts ...runtime.Option) *runtime.Node {
	t.Helper()
	tr := newTransport(t, url)
	d, err := nats.NewDiscovery(tr, nats.WithHeartbeat(heartbeat, deadAfter))
	if err != nil {
		t.Fatal(err)
	}
	return transporttest.NewNode(t, append([]runtime.Option{runtime.WithTransport(tr), runtime.WithListen(":0"), runtime.WithDiscovery(d)}, opts...)...)
}

// TestDiscoveryMesh: nodes that know only the broker find each other,
// route each other's patterns, pick up a changed pattern set, and drop a
// node that leaves.
func TestDiscoveryMesh(t *testing.T) {
	b := natstest.Start(t)
	a := meshNode(t, b.URL())
	transporttest.MustAdd(t, a, "role:a", func(ctx context.Context, r runtime.Request) (any, error) { return "a", nil })
	bn := meshNode(t, b.URL())
	transporttest.MustAdd(t, bn, "role:b", func(ctx context.Context, r runtime.Request) (any, error) { return "b", nil })
	// A node joining later learns the mesh from the answers to its query;
	// it only calls (listens nowhere), so it is not announced.
	c := meshNode(t, b.URL(), runtime.WithListen(""))
	for _, p := range []string{"role:a", "role:b"} {
		transporttest.WaitRoutable(t, c, p)
		res, err := c.ActE(t.Context(), p, nil)
		if err != nil || res.Value() != p[len("role:"):] {
			t.Fatalf("%s = %v, %v", p, res.Value(), err)
		}
	}
	// A new pattern changes b's digest: c pulls b's catalog again.
	transporttest.MustAdd(t, bn, "role:b,cmd:more", func(ctx context.Context, r runtime.Request) (any, error) { return "more", nil })
	transporttest.WaitRoutable(t, c, "role:b,cmd:more")
	// b leaves: c drops its patterns.
	if err := bn.Close(); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "c drops the patterns of the node that left", func() bool { return !transporttest.Routes(c, "role:b") })
	if !transporttest.Routes(c, "role:a") {
		t.Error("c dropped role:a too")
	}
}

// host records what a Discovery reports.
type host struct {
	self discovery.Peer
	mu   sync.Mutex
	ups  []discovery.Peer
	down chan discovery.Peer
	up   chan discovery.Peer
}

func newHost(addr string) *host {
	return &host{self: discovery.Peer{ID: addr, Instance: addr + "-1", Addr: addr, Transport: "nats"}, down: make(chan discovery.Peer, 16), up: make(chan discovery.Peer, 16)}
}

func (h *host) Self() discovery.Peer { return h.self }
func (h *host) PeerUp(p discovery.Peer) {
	h.up <- p
}
func (h *host) PeerDown(p discovery.Peer) { h.down <- p }

// TestDiscoveryKilledNodeDropped: a node that stops announcing without
// saying it leaves (its process was killed) is reported down once the
// timeout has passed since its last announcement, not before.
func TestDiscoveryKilledNodeDropped(t *testing.T) {
	b := natstest.Start(t)
	d, err := nats.NewDiscovery(newTransport(t, b.URL()), nats.WithHeartbeat(heartbeat, deadAfter))
	if err != nil {
		t.Fatal(err)
	}
	h := newHost("wizard.node.me")
	if err := d.Start(h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })

	raw, err := natsgo.Connect(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ghost := map[string]any{"v": 1, "op": "up", "id": "ghost", "instance": "g-1", "addr": "wizard.node.ghost", "transport": "nats", "digest": "d1"}
	data, _ := json.Marshal(ghost)
	if err := raw.Publish("wizard.discovery", data); err != nil {
		t.Fatal(err)
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	last := time.Now()
	want := discovery.Peer{ID: "ghost", Instance: "g-1", Addr: "wizard.node.ghost", Transport: "nats", Digest: "d1"}
	if got := testwait.Recv(t, h.up); got != want {
		t.Errorf("PeerUp(%+v), want %+v", got, want)
	}
	got := testwait.Recv(t, h.down)
	if since := time.Since(last); since < deadAfter {
		t.Errorf("dropped %v after its last announcement, before the timeout %v", since, deadAfter)
	}
	if got.Instance != "g-1" || got.Addr != "wizard.node.ghost" {
		t.Errorf("PeerDown(%+v)", got)
	}
	// A malformed announcement is dropped; it reports nothing.
	if err := raw.Publish("wizard.discovery", []byte(`{"v":1,"op":"up"}`)); err != nil {
		t.Fatal(err)
	}
	if err := raw.Publish("wizard.discovery", []byte(`{"v":1,"op":"query"}`)); err != nil { // a query: answered
		t.Fatal(err)
	}
	sub, err := raw.SubscribeSync("wizard.discovery")
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := sub.NextMsg(testwait.Guard)
		if err != nil {
			t.Fatal(err)
		}
		var a map[string]any
		if json.Unmarshal(m.Data, &a) == nil && a["id"] == "wizard.node.me" {
			break // its heartbeat, or its answer
		}
	}
	select {
	case p := <-h.up:
		t.Errorf("PeerUp(%+v) after a malformed announcement", p)
	default:
	}
}

// TestDiscoveryRejects: NewDiscovery names what is wrong.
func TestDiscoveryRejects(t *testing.T) {
	tr := newTransport(t, "nats://127.0.0.1:4222")
	for _, tc := range []struct {
		name string
		tr   *nats.Transport
		opts []nats.DiscoveryOption
		want string
	}{
		{"nil transport", nil, nil, "wizard: nats: NewDiscovery(nil): no transport"},
		{"nil option", tr, []nats.DiscoveryOption{nil}, "wizard: nats: discovery option 1 of 1 is nil"},
		{"subject", tr, []nats.DiscoveryOption{nats.WithAnnounceSubject("a.>")}, `wizard: nats: WithAnnounceSubject("a.>"): a wildcard; want a literal subject`},
		{"interval", tr, []nats.DiscoveryOption{nats.WithHeartbeat(time.Millisecond, 0)}, "wizard: nats: WithHeartbeat(1ms, 0s): want an interval of 0 for the default (1s) or at least 10ms"},
		{"timeout", tr, []nats.DiscoveryOption{nats.WithHeartbeat(time.Second, time.Second)}, "wizard: nats: WithHeartbeat(1s, 1s): want a timeout of 0 for the default (5s) or at least twice the interval"},
		{"max peers", tr, []nats.DiscoveryOption{nats.WithMaxPeers(-1)}, "wizard: nats: WithMaxPeers(-1): want 0 for the default (4096) or at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := nats.NewDiscovery(tc.tr, tc.opts...); err == nil || err.Error() != tc.want {
				t.Errorf("NewDiscovery: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestDiscoveryForeignPublisherDenied: the broker's permissions are the
// trust boundary. A client whose credentials may not publish on the
// announce subject cannot announce a node, so it cannot make the mesh
// dial a subject of its choosing; a node with the mesh's credentials can.
func TestDiscoveryForeignPublisherDenied(t *testing.T) {
	b := natstest.Start(t, func(o *server.Options) {
		o.Users = []*server.User{
			{Username: "node", Password: "pw"},
			{Username: "foreign", Password: "pw", Permissions: &server.Permissions{
				Publish: &server.SubjectPermission{Deny: []string{"wizard.discovery", "wizard.node.>"}},
			}},
		}
	})
	tr := newTransport(t, b.URL(), nats.WithUserInfo("node", "pw"))
	d, err := nats.NewDiscovery(tr, nats.WithHeartbeat(heartbeat, deadAfter))
	if err != nil {
		t.Fatal(err)
	}
	h := newHost("wizard.node.me")
	if err := d.Start(h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })

	foreign, err := natsgo.Connect(b.URL(), natsgo.UserInfo("foreign", "pw"), natsgo.ErrorHandler(func(*natsgo.Conn, *natsgo.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer foreign.Close()
	ghost, _ := json.Marshal(map[string]any{"v": 1, "op": "up", "id": "ghost", "addr": "attacker.inbox", "transport": "nats"})
	_ = foreign.Publish("wizard.discovery", ghost)
	_ = foreign.Flush() // the broker has seen (and refused) it

	// A node of the mesh, announced after: the first peer the host hears of.
	other, err := nats.NewDiscovery(newTransport(t, b.URL(), nats.WithUserInfo("node", "pw")), nats.WithHeartbeat(heartbeat, deadAfter))
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(newHost("wizard.node.other")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	if p := testwait.Recv(t, h.up); p.Addr != "wizard.node.other" {
		t.Errorf("the host heard of %+v first; want wizard.node.other", p)
	}
}

// TestDiscoveryRejoinsAfterReconnect: a node whose broker connection was
// away while another node joined hears of it as soon as the connection is
// back, not at the other node's next heartbeat.
func TestDiscoveryRejoinsAfterReconnect(t *testing.T) {
	b := natstest.Start(t)
	px := startProxy(t, b.URL())
	slow := nats.WithHeartbeat(time.Minute, 0) // no heartbeat comes within the test
	log := &testlog.Buffer{}
	tr := newTransport(t, px.url(), nats.WithLogger(log.Logger()))
	d, err := nats.NewDiscovery(tr, slow)
	if err != nil {
		t.Fatal(err)
	}
	a := transporttest.NewNode(t, runtime.WithTransport(tr), runtime.WithDiscovery(d))
	px.cut()
	testwait.Until(t, "the caller's broker connection is lost", func() bool { return strings.Contains(log.String(), "broker connection lost") })
	trB := newTransport(t, b.URL())
	bn := transporttest.NewNode(t, runtime.WithTransport(trB), runtime.WithListen(":0"), runtime.WithDiscovery(mustDiscovery(t, trB, slow)))
	transporttest.MustAdd(t, bn, "role:b", func(ctx context.Context, r runtime.Request) (any, error) { return "b", nil })
	px.heal()
	testwait.Within(t, 10*time.Second, "the caller routes the pattern of the node that joined while it was away", func() bool {
		return transporttest.Routes(a, "role:b")
	})
}

// mustDiscovery is nats.NewDiscovery, failing t on an error.
func mustDiscovery(t *testing.T, tr *nats.Transport, opts ...nats.DiscoveryOption) *nats.Discovery {
	t.Helper()
	d, err := nats.NewDiscovery(tr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// proxy forwards TCP connections to a broker until cut: then it closes
// them, and those that come until it heals.
type proxy struct {
	to string
	l  net.Listener

	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

// startProxy starts a proxy to the broker at url (nats://host:port),
// closed when the test ends.
func startProxy(t *testing.T, url string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{to: strings.TrimPrefix(url, "nats://"), l: l}
	t.Cleanup(func() { l.Close(); p.cut() })
	go p.serve()
	return p
}

func (p *proxy) url() string { return "nats://" + p.l.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.to)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(s, c); s.Close() }()
		go func() { _, _ = io.Copy(c, s); c.Close() }()
	}
}

// cut closes every connection and refuses new ones until heal.
func (p *proxy) cut() {
	p.mu.Lock()
	p.down = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// heal takes connections again.
func (p *proxy) heal() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}
