package tcp_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpki"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// TestPlainNeedsLoopback (finding 7): plain TCP on an address other than
// loopback needs tcp.WithInsecure; loopback needs nothing, TLS needs no
// more. Before, Listen served plain TCP on any address.
func TestPlainNeedsLoopback(t *testing.T) {
	refuse := func(t *testing.T, addr string) {
		l, err := newTransport(t).Listen(addr, nopServer{})
		if err == nil {
			l.Close()
			t.Fatalf("Listen(%q) served plain TCP", addr)
		}
		want := "wizard: tcp: listen " + addr + ": plain TCP on an address other than loopback"
		if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "WithServerTLS") || !strings.Contains(err.Error(), "WithInsecure") {
			t.Errorf("Listen(%q) = %v, want %q, naming WithServerTLS and WithInsecure", addr, err, want)
		}
	}
	t.Run("every interface", func(t *testing.T) { refuse(t, "0.0.0.0:0") })
	t.Run("empty host", func(t *testing.T) { refuse(t, ":0") })

	serve := func(t *testing.T, tr *tcp.Transport, addr string) {
		t.Helper()
		l, err := tr.Listen(addr, nopServer{})
		if err != nil {
			t.Fatalf("Listen(%q): %v", addr, err)
		}
		l.Close()
	}
	for _, addr := range []string{"127.0.0.1:0", "127.0.0.2:0", "localhost:0", "[::1]:0"} {
		t.Run("loopback "+addr, func(t *testing.T) {
			if addr == "[::1]:0" && !hasIPv6Loopback() {
				t.Skip("no IPv6 loopback")
			}
			serve(t, newTransport(t), addr)
		})
	}
	t.Run("insecure", func(t *testing.T) { serve(t, newTransport(t, tcp.WithInsecure()), "0.0.0.0:0") })
	t.Run("TLS", func(t *testing.T) {
		serve(t, newTransport(t, tcp.WithServerTLS(testpki.New(t).ServerConfig())), "0.0.0.0:0")
	})
}

// hasIPv6Loopback reports whether ::1 can be bound.
func hasIPv6Loopback() bool {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// nopServer serves nothing.
type nopServer struct{}

func (nopServer) ServeMessage(ctx context.Context, m *runtime.Message) *runtime.Message { return nil }
