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
	"github.com/wizardmesh/wizard/runtime/internal/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/transporttest"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// TestRemoteShutdownMovesOn: with two servers serving a pattern, calls that
// a server going away refuses go to the other one.
func TestRemoteShutdownMovesOn(t *testing.T) {
	a := newServer(t)
	b := newServer(t)
	started := make(chan struct{}, 1)
	release := transporttest.NewGate(t)
	transporttest.MustAdd(t, a, "role:only-a", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-release.C()
		return "a done", nil
	})
	transporttest.MustAdd(t, b, "role:only-b", func(ctx context.Context, r runtime.Request) (any, error) { return "b", nil })
	transporttest.MustAdd(t, a, "role:both", func(ctx context.Context, r runtime.Request) (any, error) { return "a", nil })
	transporttest.MustAdd(t, b, "role:both", func(ctx context.Context, r runtime.Request) (any, error) { return "b", nil })
	var sink transporttest.Log
	cl := newClientWith(t, "role:only-a", []runtime.Option{runtime.WithTransport(tcp.New(tcp.WithLogger(sink.Logger())))}, a.Addr(), b.Addr())
	transporttest.WaitRoutable(t, cl, "role:only-b")

	// Both serve role:both, in turn.
	seen := map[any]int{}
	for range 4 {
		res, err := cl.ActE(t.Context(), "role:both", nil)
		if err != nil {
			t.Fatal(err)
		}
		seen[res.Value()]++
	}
	if seen["a"] != 2 || seen["b"] != 2 {
		t.Errorf("before the shutdown, served by %v; want a and b in turn", seen)
	}

	inflight := make(chan error, 1)
	go func() {
		_, err := cl.ActE(context.Background(), "role:only-a", nil)
		inflight <- err
	}()
	testwait.Recv(t, started)
	goaway := sink.Seen("going away")
	shut := make(chan error, 1)
	go func() { shut <- a.Shutdown(context.Background()) }()
	testwait.Recv(t, goaway)

	for i := range 10 {
		res, err := cl.ActE(t.Context(), "role:both", nil)
		if err != nil || res.Value() != "b" {
			t.Fatalf("call %d while a goes away: %v, %v; want b", i, res.Value(), err)
		}
	}
	_, err := cl.ActE(t.Context(), "role:only-a", nil)
	transporttest.WantCode(t, err, runtime.CodeUnavailable)

	release.Open()
	if err := testwait.Recv(t, inflight); err != nil {
		t.Errorf("the call in flight on a: %v", err)
	}
	if err := testwait.Recv(t, shut); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
}

// TestRemoteShutdownDrainsChainedCalls: a server shutting down keeps its
// own peers until the calls it drains are done, for they may call them.
func TestRemoteShutdownDrainsChainedCalls(t *testing.T) {
	back := newServer(t)
	started := make(chan struct{}, 1)
	release := transporttest.NewGate(t)
	transporttest.MustAdd(t, back, "role:back", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-release.C()
		return "back done", nil
	})
	front := transporttest.NewNode(t, runtime.WithTransport(tcp.New()), runtime.WithListen("127.0.0.1:0"), runtime.WithDiscovery(runtime.StaticPeers(back.Addr())))
	transporttest.WaitRoutable(t, front, "role:back")
	transporttest.MustAdd(t, front, "role:front", func(ctx context.Context, r runtime.Request) (any, error) {
		res, err := front.ActE(ctx, "role:back", nil)
		return res.Value(), err
	})
	var sink transporttest.Log
	cl := newClientWith(t, "role:front", []runtime.Option{runtime.WithTransport(tcp.New(tcp.WithLogger(sink.Logger())))}, front.Addr())

	type result struct {
		v   any
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := cl.ActE(context.Background(), "role:front", nil)
		done <- result{res.Value(), err}
	}()
	testwait.Recv(t, started)
	goaway := sink.Seen("going away")
	shut := make(chan error, 1)
	go func() { shut <- front.Shutdown(context.Background()) }()
	testwait.Recv(t, goaway)
	release.Open()
	if r := testwait.Recv(t, done); r.err != nil || r.v != "back done" {
		t.Errorf("the chained call = %v, %v", r.v, r.err)
	}
	if err := testwait.Recv(t, shut); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
}

// TestRemoteShutdownDeadline: when Shutdown's ctx ends first, the calls in
// flight are cancelled and fail; Shutdown returns ctx's error.
func TestRemoteShutdownDeadline(t *testing.T) {
	srv := newServer(t)
	started := make(chan struct{}, 1)
	ended := make(chan error, 1)
	transporttest.MustAdd(t, srv, "role:stuck", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, ctx.Err()
	})
	cl := newClient(t, "role:stuck", srv.Addr())
	errc := make(chan error, 1)
	go func() {
		_, err := cl.ActE(context.Background(), "role:stuck", nil)
		errc <- err
	}()
	testwait.Recv(t, started)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown = %v, want context.Canceled", err)
	}
	if err := testwait.Recv(t, ended); err != context.Canceled {
		t.Errorf("the handler's ctx ended with %v", err)
	}
	err := testwait.Recv(t, errc)
	transporttest.WantCode(t, err, runtime.CodeUnavailable)
	if errors.Is(err, runtime.ErrNotSent) {
		t.Errorf("%v says the call was not sent, but it ran", err)
	}
}

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
	cl, err := runtime.New(runtime.WithTransport(tcp.New()), runtime.WithDiscovery(runtime.StaticPeers(addr)))
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
		{"plain", tcp.New()},
		{"tls", tcp.New(tcp.WithClientTLS(&tls.Config{InsecureSkipVerify: true}))},
		{"handshake timeout", tcp.New(tcp.WithHandshakeTimeout(50 * time.Millisecond))},
		{"tls handshake timeout", tcp.New(tcp.WithHandshakeTimeout(50*time.Millisecond), tcp.WithClientTLS(&tls.Config{InsecureSkipVerify: true}))},
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
