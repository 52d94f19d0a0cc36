package tcp_test

import (
	"context"
	"net"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// dialFrom dials addr over TCP from the local IP from.
func dialFrom(ctx context.Context, addr, from string) (transporttest.RawConn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	return d.DialContext(ctx, "tcp", addr)
}

// TestActiveConnectionsLeaveRoom (issue 27, item 3): a listener full of
// connections from a few IPs that all stay active, with a call now and
// then or with one call in flight each, still serves a new caller from
// another IP: the IP with the most connections gives one up.
func TestActiveConnectionsLeaveRoom(t *testing.T) {
	const limit = 72
	for _, tt := range []struct {
		name string
		busy bool
	}{
		{"calling", false},
		{"one call in flight each", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, runtime.WithTransport(newTransport(t, tcp.WithMaxConns(limit))))
			served := transporttest.Admission(t, srv, dialFrom, limit, tt.busy)
			t.Logf("the new caller's calls served: %d of 50", served)
			if served != 50 {
				t.Errorf("the new caller's calls served: %d of 50, want all", served)
			}
		})
	}
}
