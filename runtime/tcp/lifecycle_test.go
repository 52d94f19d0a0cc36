package tcp_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// silentListener accepts connections and never writes; it reports each
// connection it accepts.
func silentListener(t *testing.T) (addr string, accepted <-chan net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan net.Conn, 16)
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			ch <- c
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String(), ch
}

// TestCloseWhileDialing: a node closes at once even while a peer holds its
// handshake.
func TestCloseWhileDialing(t *testing.T) {
	addr, accepted := silentListener(t)
	cl, err := runtime.New(runtime.WithTransport(newTransport(t)), runtime.WithDiscovery(runtime.StaticPeers(addr)))
	if err != nil {
		t.Fatal(err)
	}
	testwait.Recv(t, accepted) // the client waits for the server's handshake
	closed := make(chan error, 1)
	go func() { closed <- cl.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close = %v", err)
		}
	case <-time.After(5 * time.Second): // the handshake timeout is 10s
		t.Fatal("Close waited for the peer's handshake")
	}
}

// TestDialHonoursContext: Dial gives up on a silent peer when its ctx ends.
func TestDialHonoursContext(t *testing.T) {
	addr, _ := silentListener(t)
	for _, tt := range []struct {
		name string
		tr   *tcp.Transport
	}{
		{"plain", newTransport(t)},
		{"tls", newTransport(t, tcp.WithClientTLS(&tls.Config{InsecureSkipVerify: true}))},
		{"handshake timeout", newTransport(t, tcp.WithHandshakeTimeout(50*time.Millisecond))},
		{"tls handshake timeout", newTransport(t, tcp.WithHandshakeTimeout(50*time.Millisecond), tcp.WithClientTLS(&tls.Config{InsecureSkipVerify: true}))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if !strings.Contains(tt.name, "timeout") {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel()
			}
			errc := make(chan error, 1)
			go func() {
				c, err := tt.tr.Dial(ctx, addr)
				if err == nil {
					c.Close()
				}
				errc <- err
			}()
			select {
			case err := <-errc:
				if !errors.Is(err, runtime.ErrNotSent) {
					t.Errorf("Dial = %v, want an error wrapping ErrNotSent", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Dial did not give up")
			}
		})
	}
}
