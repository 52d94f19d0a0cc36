package tcp_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/introspect"
)

const inventory = "role:inventory,cmd:get_item"

// warnings counts the records at Warn and above in log that contain what.
func warnings(log, what string) int {
	n := 0
	for line := range strings.Lines(log) {
		if (strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR")) && strings.Contains(line, what) {
			n++
		}
	}
	return n
}

// wantSays fails t unless err's message holds every one of says.
func wantSays(t *testing.T, err error, says ...string) {
	t.Helper()
	for _, s := range says {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("%v: does not say %q", err, s)
		}
	}
}

// TestDownServerUnavailable (issue 13): a caller whose only peer is down
// does not answer not_found, as for a pattern nobody serves, but
// unavailable, naming the peer and why it cannot be reached; WaitFor says
// what it waited for and what the node knows; the dial failure is logged
// once at Warn, not at each redial.
func TestDownServerUnavailable(t *testing.T) {
	addr := transporttest.FreeAddr(t) // nothing listens there
	var logs testlog.Buffer
	cl := transporttest.NewNode(t, runtime.WithTransport(newTransport(t)), runtime.WithDiscovery(runtime.StaticPeers(addr)),
		runtime.WithLogger(logs.Logger()))
	testwait.Until(t, "the client redials the peer", func() bool {
		return strings.Count(logs.String(), "unreachable") >= 3
	})

	_, err := cl.ActE(t.Context(), inventory, nil)
	transporttest.WantCode(t, err, runtime.CodeUnavailable)
	if !errors.Is(err, runtime.ErrUnavailable) {
		t.Errorf("errors.Is(%v, ErrUnavailable) = false", err)
	}
	t.Log(err)
	wantSays(t, err, `"cmd:get_item,role:inventory"`, addr, "connection refused")

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err = cl.WaitFor(ctx, inventory)
	if !errors.Is(err, context.DeadlineExceeded) || runtime.CodeOf(err) != runtime.CodeDeadlineExceeded {
		t.Errorf("WaitFor: %v, want a deadline exceeded", err)
	}
	t.Log(err)
	wantSays(t, err, `"cmd:get_item,role:inventory"`, addr, "tcp", "not connected", "connection refused")

	var m introspect.Member
	for _, mm := range cl.Members() {
		if mm.Addr == addr {
			m = mm
		}
	}
	if m.Addr != addr || m.Connected || m.Transport != "tcp" || !strings.Contains(m.LastError, "connection refused") {
		t.Errorf("Members: %+v, want %s on tcp, not connected, with its dial error", m, addr)
	}
	if n := warnings(logs.String(), "peer unreachable"); n != 1 {
		t.Errorf("%d warnings of the dial failure, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "connection refused") {
		t.Errorf("the log does not say why:\n%s", logs.String())
	}
}

// TestServerLostUnavailable: once the only server of a pattern goes away,
// a call is unavailable, naming it, and the lost connection is a warning
// that says why it ended.
func TestServerLostUnavailable(t *testing.T) {
	srv := newServer(t)
	transporttest.MustAdd(t, srv, inventory, func(ctx context.Context, req runtime.Request) (any, error) { return "item", nil })
	var logs testlog.Buffer
	cl := newClientWith(t, inventory, []runtime.Option{runtime.WithLogger(logs.Logger())}, srv.Addr())
	if _, err := cl.ActE(t.Context(), inventory, nil); err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr()
	srv.Close()
	testwait.Until(t, "the client loses the server's patterns", func() bool { return !transporttest.Routes(cl, inventory) })
	_, err := cl.ActE(t.Context(), inventory, nil)
	transporttest.WantCode(t, err, runtime.CodeUnavailable)
	t.Log(err)
	wantSays(t, err, addr)
	testwait.Until(t, "the lost connection logged", func() bool { return warnings(logs.String(), "connection to peer lost") == 1 })
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "connection to peer lost") && !strings.Contains(line, "err=") {
			t.Errorf("the warning does not say why the connection ended: %s", line)
		}
	}
}

// TestNobodyServesNotFound: with every known peer reachable, a pattern
// none serves is still not_found.
func TestNobodyServesNotFound(t *testing.T) {
	srv := newServer(t)
	transporttest.MustAdd(t, srv, "role:other", func(ctx context.Context, req runtime.Request) (any, error) { return nil, nil })
	cl := newClient(t, "role:other", srv.Addr())
	_, err := cl.ActE(t.Context(), inventory, nil)
	transporttest.WantCode(t, err, runtime.CodeNotFound)
	if !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("errors.Is(%v, ErrNotFound) = false", err)
	}
}

// otherTransport is discovery that reports a peer on QUIC, as gossip in a
// QUIC mesh does to a TCP node.
type otherTransport struct{ addr string }

func (d otherTransport) Start(h discovery.Host) error {
	for range 3 { // gossip repeats itself
		h.PeerUp(discovery.Peer{ID: "inventory-1", Addr: d.addr, Transport: "quic"})
	}
	return nil
}

func (otherTransport) Close() error { return nil }

// TestOtherTransportPeer (issue 13): a TCP node told of a QUIC peer warns
// once, shows it in Members as on another transport and not connected,
// and a call it cannot route is unavailable, naming it and its transport.
func TestOtherTransportPeer(t *testing.T) {
	const addr = "127.0.0.1:4433"
	var logs testlog.Buffer
	cl := transporttest.NewNode(t, runtime.WithTransport(newTransport(t)), runtime.WithDiscovery(otherTransport{addr}), runtime.WithLogger(logs.Logger()))
	if n := warnings(logs.String(), "another transport"); n != 1 {
		t.Errorf("%d warnings of the peer on another transport, want 1:\n%s", n, logs.String())
	}
	var got []introspect.Member
	for _, m := range cl.Members() {
		if !m.Self {
			got = append(got, m)
		}
	}
	if len(got) != 1 || got[0].Addr != addr || got[0].ID != "inventory-1" || got[0].Transport != "quic" || got[0].Connected {
		t.Errorf("Members: %+v, want inventory-1 at %s on quic, not connected", got, addr)
	}
	_, err := cl.ActE(t.Context(), inventory, nil)
	transporttest.WantCode(t, err, runtime.CodeUnavailable)
	t.Log(err)
	wantSays(t, err, addr, "quic")
}
