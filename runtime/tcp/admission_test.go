package tcp_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// dialFrom dials addr over TCP from the local IP from.
func dialFrom(ctx context.Context, addr, from string) (transporttest.RawConn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	return d.DialContext(ctx, "tcp", addr)
}

// hookedTransport is a tcp.Transport that calls before ahead of each dial.
type hookedTransport struct {
	*tcp.Transport
	before func()
}

func (h hookedTransport) Dial(ctx context.Context, addr string) (runtime.Conn, error) {
	h.before()
	return h.Transport.Dial(ctx, addr)
}

// nodeCaller is a node calling from the local IP from: it waits for the
// pattern to be routable (within the guard: it never is while its
// connections are refused), then makes its calls.
func nodeCaller(t *testing.T, addr, from string, beforeDial func()) func() bool {
	tr := hookedTransport{newTransport(t, tcp.WithLocalAddr(from)), beforeDial}
	n := transporttest.NewNode(t, runtime.WithTransport(tr),
		runtime.WithDiscovery(runtime.StaticPeers(addr)), runtime.WithCatalogRefresh(50*time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), testwait.Guard)
	defer cancel()
	n.WaitFor(ctx, "role:fair,cmd:ping")
	return func() bool {
		_, err := n.ActE(t.Context(), "role:fair,cmd:ping", nil)
		return err == nil
	}
}

// TestActiveConnectionsLeaveRoom (issue 27, item 3): a listener full of
// connections from a few IPs that all stay active, with a call now and
// then or with one call in flight each, still serves a new caller from
// another IP, a node among them: the IP with the most connections gives
// one up.
func TestActiveConnectionsLeaveRoom(t *testing.T) {
	const limit = 72
	for _, tt := range []struct {
		name   string
		busy   bool
		caller transporttest.NewCaller
	}{
		{"calling", false, nil},
		{"one call in flight each", true, nil},
		{"calling, a node new", false, nodeCaller},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, runtime.WithTransport(newTransport(t, tcp.WithMaxConns(limit))))
			served := transporttest.Admission(t, srv, dialFrom, limit, tt.busy, tt.caller)
			t.Logf("the new caller's calls served: %d of 50", served)
			if served != 50 {
				t.Errorf("the new caller's calls served: %d of 50, want all", served)
			}
		})
	}
}
