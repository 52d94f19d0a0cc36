package tcp_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testwait"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// TestRemoteReconnect stops a server and starts a new one on the same
// address: the client reconnects by itself and later calls succeed.
func TestRemoteReconnect(t *testing.T) {
	addr := freeAddr(t)
	start := func(gen string) *runtime.Node {
		t.Helper()
		n := newNode(t, runtime.WithTransport(tcp.New()), runtime.WithListen(addr))
		mustAdd(t, n, "role:r,cmd:who", func(ctx context.Context, r runtime.Request) (any, error) { return gen, nil })
		mustAdd(t, n, "role:r,gen:"+gen, func(ctx context.Context, r runtime.Request) (any, error) { return gen, nil })
		return n
	}
	who := func(cl *runtime.Node) (any, error) {
		res, err := cl.ActE(t.Context(), "role:r,cmd:who", nil)
		return res.Value(), err
	}

	s1 := start("1")
	// No periodic refresh: reconnecting fetches the catalog by itself.
	cl := newClientWith(t, "role:r,gen:1", []runtime.Option{runtime.WithCatalogRefresh(time.Hour)}, addr)
	if got, err := who(cl); got != "1" || err != nil {
		t.Fatalf("first server: %v, %v", got, err)
	}

	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the client drops the stopped server's patterns", func() bool { return !routes(cl, "role:r,cmd:who") })
	// Meanwhile calls fail at once, without hanging.
	if _, err := who(cl); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("server down: %v", err)
	}

	start("2")
	waitRoutable(t, cl, "role:r,gen:2")
	for range 3 {
		if got, err := who(cl); got != "2" || err != nil {
			t.Fatalf("restarted server: %v, %v", got, err)
		}
	}
	if routes(cl, "role:r,gen:1") {
		t.Errorf("the first server's catalog is still routed: %v", cl.Patterns())
	}
}

// TestRemoteGracefulShutdown shuts a server down while a call runs on it:
// that call finishes, new ones fail cleanly (and surely did not run).
func TestRemoteGracefulShutdown(t *testing.T) {
	srv := newServer(t)
	started := make(chan struct{}, 1)
	release := newGate(t)
	ran := make(chan string, 8)
	mustAdd(t, srv, "role:slow", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-release.C()
		return "slow done", nil
	})
	mustAdd(t, srv, "role:fast", func(ctx context.Context, r runtime.Request) (any, error) {
		ran <- "fast"
		return "fast", nil
	})
	var sink logSink
	cl := newClientWith(t, "role:fast", []runtime.Option{runtime.WithTransport(tcp.New(tcp.WithLogger(sink.logger())))}, srv.Addr())

	inflight := make(chan runtime.Result, 1)
	go func() {
		res, err := cl.ActE(context.Background(), "role:slow", nil)
		if err != nil {
			t.Errorf("the call in flight: %v", err)
		}
		inflight <- res
	}()
	testwait.Recv(t, started)

	goaway := sink.seen("going away")
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	testwait.Recv(t, goaway)

	_, err := cl.ActE(t.Context(), "role:fast", nil)
	wantCode(t, err, runtime.CodeUnavailable)
	if !errors.Is(err, runtime.ErrNotSent) {
		t.Errorf("errors.Is(%v, ErrNotSent) = false: the caller cannot tell it did not run", err)
	}
	select {
	case <-ran:
		t.Error("a call made after the goaway ran")
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a call in flight", err)
	default:
	}

	release.Open()
	if res := testwait.Recv(t, inflight); res.Value() != "slow done" {
		t.Errorf("the call in flight = %v", res.Value())
	}
	if err := testwait.Recv(t, shut); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	// Once the server is gone, its patterns leave the client.
	waitUntil(t, "the client drops the server's patterns", func() bool { return !routes(cl, "role:fast") })
}

// TestRemoteShutdownMovesOn: with two servers serving a pattern, calls that
// a server going away refuses go to the other one.
func TestRemoteShutdownMovesOn(t *testing.T) {
	a := newServer(t)
	b := newServer(t)
	started := make(chan struct{}, 1)
	release := newGate(t)
	mustAdd(t, a, "role:only-a", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-release.C()
		return "a done", nil
	})
	mustAdd(t, b, "role:only-b", func(ctx context.Context, r runtime.Request) (any, error) { return "b", nil })
	mustAdd(t, a, "role:both", func(ctx context.Context, r runtime.Request) (any, error) { return "a", nil })
	mustAdd(t, b, "role:both", func(ctx context.Context, r runtime.Request) (any, error) { return "b", nil })
	var sink logSink
	cl := newClientWith(t, "role:only-a", []runtime.Option{runtime.WithTransport(tcp.New(tcp.WithLogger(sink.logger())))}, a.Addr(), b.Addr())
	waitRoutable(t, cl, "role:only-b")

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
	goaway := sink.seen("going away")
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
	wantCode(t, err, runtime.CodeUnavailable)

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
	release := newGate(t)
	mustAdd(t, back, "role:back", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-release.C()
		return "back done", nil
	})
	front := newNode(t, runtime.WithTransport(tcp.New()), runtime.WithListen("127.0.0.1:0"), runtime.WithDiscovery(runtime.StaticPeers(back.Addr())))
	waitRoutable(t, front, "role:back")
	mustAdd(t, front, "role:front", func(ctx context.Context, r runtime.Request) (any, error) {
		res, err := front.ActE(ctx, "role:back", nil)
		return res.Value(), err
	})
	var sink logSink
	cl := newClientWith(t, "role:front", []runtime.Option{runtime.WithTransport(tcp.New(tcp.WithLogger(sink.logger())))}, front.Addr())

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
	goaway := sink.seen("going away")
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
	mustAdd(t, srv, "role:stuck", func(ctx context.Context, r runtime.Request) (any, error) {
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
	wantCode(t, err, runtime.CodeUnavailable)
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

// TestNoGoroutineLeaks runs calls of every kind, closes the nodes and
// checks that their goroutines are gone.
func TestNoGoroutineLeaks(t *testing.T) {
	checkLeaks := leak.Mark(t)
	func() {
		srv, err := runtime.New(runtime.WithTransport(tcp.New()), runtime.WithListen("127.0.0.1:0"))
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		blocked := make(chan struct{}, 1)
		mustAdd(t, srv, "role:leak,cmd:ok", func(ctx context.Context, r runtime.Request) (any, error) { return r.Msg(), nil })
		mustAdd(t, srv, "role:leak,cmd:block", func(ctx context.Context, r runtime.Request) (any, error) {
			blocked <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		})
		cl, err := runtime.New(runtime.WithTransport(tcp.New()), runtime.WithDiscovery(runtime.StaticPeers(srv.Addr(), freeAddr(t))))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		waitRoutable(t, cl, "role:leak,cmd:block")
		ctx := t.Context()
		if _, err := cl.ActE(ctx, "role:leak,cmd:ok", wrapperspb.Int64(1)); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.ActE(ctx, "role:leak,cmd:ok", nil, runtime.NoReply()); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		go func() { <-blocked; cancel() }()
		if _, err := cl.ActE(cctx, "role:leak,cmd:block", nil); runtime.CodeOf(err) != runtime.CodeCanceled {
			t.Fatalf("cancelled call: %v", err)
		}
		// A call in flight when the nodes close.
		go cl.ActE(ctx, "role:leak,cmd:block", nil)
		testwait.Recv(t, blocked)
	}()
	checkLeaks()
}

// TestRemoteConcurrentLoad runs many concurrent calls of several kinds
// over one connection per peer, for the race detector.
func TestRemoteConcurrentLoad(t *testing.T) {
	const workers, calls = 8, 200
	a := newServer(t, runtime.WithID("a"))
	b := newServer(t, runtime.WithID("b"))
	for _, s := range []*runtime.Node{a, b} {
		mustAdd(t, s, "role:load,cmd:double", runtime.NewUnaryHandler(func(ctx context.Context, r *wrapperspb.Int64Value) (*wrapperspb.Int64Value, error) {
			return wrapperspb.Int64(2 * r.GetValue()), nil
		}))
		mustAdd(t, s, "role:load,cmd:sum", func(ctx context.Context, r runtime.Request) (any, error) {
			return map[string]any{"r": r.Get("a").(float64) + r.Get("b").(float64)}, nil
		})
		mustAdd(t, s, "role:load,cmd:fail", func(ctx context.Context, r runtime.Request) (any, error) {
			return nil, runtime.Errorf(runtime.CodeAborted, "wizard: abort %v", r.Get("i"))
		})
	}
	cl := newClient(t, "role:load,cmd:fail", a.Addr(), b.Addr())
	double := runtime.NewClient[wrapperspb.Int64Value, wrapperspb.Int64Value](cl, "role:load,cmd:double")

	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			ctx := context.Background()
			for i := range calls {
				n := int64(w*calls + i)
				var err error
				switch i % 4 {
				case 0, 1:
					var r *wrapperspb.Int64Value
					if r, err = double.Call(ctx, wrapperspb.Int64(n)); err == nil && r.GetValue() != 2*n {
						err = fmt.Errorf("double(%d) = %d", n, r.GetValue())
					}
				case 2:
					var res runtime.Result
					if res, err = cl.Act(ctx, "role:load,cmd:sum", map[string]any{"a": n, "b": 1}); err == nil {
						var out struct{ R int64 }
						if err = res.Decode(&out); err == nil && out.R != n+1 {
							err = fmt.Errorf("sum(%d, 1) = %d", n, out.R)
						}
					}
				case 3:
					_, err = cl.ActE(ctx, "role:load,cmd:fail", map[string]any{"i": n})
					if want := fmt.Sprintf("wizard: abort %d", n); runtime.CodeOf(err) == runtime.CodeAborted && err.Error() == want {
						err = nil
					} else {
						err = fmt.Errorf("fail(%d) = %v, want %s", n, err, want)
					}
				}
				if err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}
