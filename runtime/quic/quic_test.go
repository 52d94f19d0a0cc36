package quic_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	quicgo "github.com/quic-go/quic-go"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testpki"
	"github.com/wizardmesh/wizard/runtime/internal/testwait"
	"github.com/wizardmesh/wizard/runtime/quic"
)

// guard bounds every wait: on a loaded machine things are slow, but
// nothing should take this long.
const guard = 15 * time.Second

// transport returns a QUIC transport that serves p's server certificate
// and trusts p's CA.
func transport(p *testpki.CA, opts ...quic.Option) *quic.Transport {
	return quic.New(append([]quic.Option{quic.WithServerTLS(p.ServerConfig()), quic.WithClientTLS(p.ClientConfig())}, opts...)...)
}

// newServer starts a node listening on addr (127.0.0.1:0 when empty).
func newServer(t testing.TB, tr *quic.Transport, addr string) *runtime.Node {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	return newNode(t, runtime.WithTransport(tr), runtime.WithListen(addr))
}

// newClient starts a node that calls addr, and waits until pattern is
// routable.
func newClient(t testing.TB, tr *quic.Transport, pattern, addr string) *runtime.Node {
	t.Helper()
	n := newNode(t, runtime.WithTransport(tr), runtime.WithDiscovery(runtime.StaticPeers(addr)), runtime.WithCatalogRefresh(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := n.WaitFor(ctx, pattern); err != nil {
		t.Fatalf("pattern %q never became routable: %v; have %v", pattern, err, n.Patterns())
	}
	return n
}

// newNode starts a node that is closed when the test ends.
func newNode(t testing.TB, opts ...runtime.Option) *runtime.Node {
	t.Helper()
	n, err := runtime.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func mustAdd(t testing.TB, n *runtime.Node, pattern string, h runtime.Handler) {
	t.Helper()
	if err := n.Add(pattern, h); err != nil {
		t.Fatal(err)
	}
}

// neg is a typed handler: it negates an Int64Value.
var neg = runtime.NewUnaryHandler(func(ctx context.Context, r *wrapperspb.Int64Value) (*wrapperspb.Int64Value, error) {
	return wrapperspb.Int64(-r.GetValue()), nil
})

func TestRemoteRoundTrip(t *testing.T) {
	tr := transport(testpki.New(t))
	srv := newServer(t, tr, "")
	mustAdd(t, srv, "role:math,cmd:sum", func(ctx context.Context, r runtime.Request) (any, error) {
		return map[string]any{"r": r.Get("a").(float64) + r.Get("b").(float64)}, nil
	})
	mustAdd(t, srv, "role:math,cmd:neg", neg)
	mustAdd(t, srv, "role:math,cmd:fail", func(ctx context.Context, r runtime.Request) (any, error) {
		return nil, runtime.Errorf(runtime.CodeFailedPrecondition, "no can do")
	})
	cl := newClient(t, tr, "role:math,cmd:fail", srv.Addr())

	t.Run("JSON", func(t *testing.T) {
		res, err := cl.Act(t.Context(), "role:math,cmd:sum", map[string]any{"a": 1, "b": 2})
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ R float64 }
		if err := res.Decode(&out); err != nil || out.R != 3 {
			t.Fatalf("sum = %+v, %v", out, err)
		}
	})
	t.Run("protobuf", func(t *testing.T) {
		c := runtime.NewClient[wrapperspb.Int64Value, wrapperspb.Int64Value](cl, "role:math,cmd:neg")
		r, err := c.Call(t.Context(), wrapperspb.Int64(7))
		if err != nil || r.GetValue() != -7 {
			t.Fatalf("neg = %v, %v", r, err)
		}
	})
	t.Run("error keeps code and message", func(t *testing.T) {
		_, err := cl.Act(t.Context(), "role:math,cmd:fail", nil)
		if runtime.CodeOf(err) != runtime.CodeFailedPrecondition || err.Error() != "no can do" {
			t.Fatalf("code %v, err %v", runtime.CodeOf(err), err)
		}
	})
	t.Run("no handler", func(t *testing.T) {
		if _, err := cl.Act(t.Context(), "role:math,cmd:nope", nil); !errors.Is(err, runtime.ErrNotFound) {
			t.Fatalf("nope: %v", err)
		}
	})
}

// TestRemoteDeadlineAndCancel: the caller's remaining budget travels and
// ends the remote handler's ctx; a cancel reaches the remote handler.
func TestRemoteDeadlineAndCancel(t *testing.T) {
	tr := transport(testpki.New(t))
	srv := newServer(t, tr, "")
	type report struct {
		deadline time.Time
		ok       bool
	}
	reports := make(chan report, 1)
	mustAdd(t, srv, "role:dl,cmd:report", func(ctx context.Context, r runtime.Request) (any, error) {
		dl, ok := ctx.Deadline()
		reports <- report{dl, ok}
		return nil, nil
	})
	started := make(chan struct{}, 1)
	ended := make(chan error, 1)
	mustAdd(t, srv, "role:dl,cmd:block", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, ctx.Err()
	})
	cl := newClient(t, tr, "role:dl,cmd:block", srv.Addr())

	t.Run("the deadline travels", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		callerDL, _ := ctx.Deadline()
		if _, err := cl.ActE(ctx, "role:dl,cmd:report", nil); err != nil {
			t.Fatal(err)
		}
		// The budget travels, not the instant: the remote deadline is
		// the caller's, moved by the transit time at most.
		r := testwait.Recv(t, reports)
		if d := r.deadline.Sub(callerDL); !r.ok || d < -time.Millisecond || d > 5*time.Second {
			t.Errorf("remote deadline %v (set %v), caller's %v (diff %v)", r.deadline, r.ok, callerDL, d)
		}
	})
	t.Run("the deadline ends the remote ctx", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, err := cl.ActE(ctx, "role:dl,cmd:block", nil)
		if runtime.CodeOf(err) != runtime.CodeDeadlineExceeded {
			t.Errorf("call: %v (code %v), want DeadlineExceeded", err, runtime.CodeOf(err))
		}
		testwait.Recv(t, started)
		if err := testwait.Recv(t, ended); err == nil {
			t.Error("remote ctx ended without an error")
		}
	})
	t.Run("cancel reaches the remote handler", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := cl.ActE(ctx, "role:dl,cmd:block", nil)
			errc <- err
		}()
		testwait.Recv(t, started)
		cancel()
		if err := testwait.Recv(t, ended); !errors.Is(err, context.Canceled) {
			t.Errorf("remote ctx: %v, want context.Canceled", err)
		}
		if err := testwait.Recv(t, errc); runtime.CodeOf(err) != runtime.CodeCanceled {
			t.Errorf("call: %v (code %v), want Canceled", err, runtime.CodeOf(err))
		}
	})
}

func TestRemoteNoReply(t *testing.T) {
	tr := transport(testpki.New(t))
	srv := newServer(t, tr, "")
	got := make(chan string, 1)
	mustAdd(t, srv, "role:log,cmd:put", func(ctx context.Context, r runtime.Request) (any, error) {
		got <- r.Get("msg").(string)
		return map[string]any{"dropped": true}, nil
	})
	cl := newClient(t, tr, "role:log,cmd:put", srv.Addr())
	res, err := cl.Act(t.Context(), "role:log,cmd:put", map[string]any{"msg": "hello"}, runtime.NoReply())
	if err != nil || res.Value() != nil {
		t.Fatalf("NoReply call = %v, %v; want an empty result", res.Value(), err)
	}
	if msg := testwait.Recv(t, got); msg != "hello" {
		t.Errorf("handler got %q", msg)
	}
}

// TestRemoteConcurrentCalls runs many concurrent calls of both codecs over
// one connection (its streams), for the race detector.
func TestRemoteConcurrentCalls(t *testing.T) {
	tr := transport(testpki.New(t), quic.WithStreams(3))
	srv := newServer(t, tr, "")
	mustAdd(t, srv, "role:math,cmd:neg", neg)
	mustAdd(t, srv, "role:math,cmd:sum", func(ctx context.Context, r runtime.Request) (any, error) {
		return map[string]any{"r": r.Get("a").(float64) + r.Get("b").(float64)}, nil
	})
	cl := newClient(t, tr, "role:math,cmd:sum", srv.Addr())
	c := runtime.NewClient[wrapperspb.Int64Value, wrapperspb.Int64Value](cl, "role:math,cmd:neg")

	const workers, calls = 16, 100
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				v := int64(w*calls + i)
				if i%2 == 0 {
					r, err := c.Call(t.Context(), wrapperspb.Int64(v))
					if err != nil || r.GetValue() != -v {
						errs <- fmt.Errorf("neg(%d) = %v, %v", v, r, err)
						return
					}
					continue
				}
				res, err := cl.Act(t.Context(), "role:math,cmd:sum", map[string]any{"a": v, "b": 1})
				var out struct{ R int64 }
				if err == nil {
					err = res.Decode(&out)
				}
				if err != nil || out.R != v+1 {
					errs <- fmt.Errorf("sum(%d, 1) = %v, %v", v, out.R, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestMutualTLS: a server that requires client certificates serves a
// client that has one and refuses one that has none; a client refuses a
// server its CA did not sign.
func TestMutualTLS(t *testing.T) {
	p := testpki.New(t)
	srvT := quic.New(quic.WithServerTLS(p.MutualServerConfig()))
	srv := newServer(t, srvT, "")
	mustAdd(t, srv, "role:math,cmd:neg", neg)

	t.Run("client with a certificate", func(t *testing.T) {
		cl := newClient(t, quic.New(quic.WithClientTLS(p.ClientCertConfig())), "role:math,cmd:neg", srv.Addr())
		c := runtime.NewClient[wrapperspb.Int64Value, wrapperspb.Int64Value](cl, "role:math,cmd:neg")
		if r, err := c.Call(t.Context(), wrapperspb.Int64(2)); err != nil || r.GetValue() != -2 {
			t.Fatalf("neg = %v, %v", r, err)
		}
	})
	refused := func(t *testing.T, tr *quic.Transport, want string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), guard)
		defer cancel()
		conn, err := tr.Dial(ctx, srv.Addr())
		if err == nil {
			conn.Close()
			t.Fatal("Dial succeeded")
		}
		if !errors.Is(err, runtime.ErrNotSent) || !strings.Contains(err.Error(), want) {
			t.Errorf("Dial: %v; want ErrNotSent and %q", err, want)
		}
	}
	t.Run("client without a certificate", func(t *testing.T) {
		refused(t, quic.New(quic.WithClientTLS(p.ClientConfig())), "certificate required")
	})
	t.Run("server from another CA", func(t *testing.T) {
		other := testpki.New(t)
		refused(t, quic.New(quic.WithClientTLS(other.ClientCertConfig())), "certificate signed by unknown authority")
	})
}

// TestALPN: a client offering another application protocol is refused,
// and so is a server that speaks another one.
func TestALPN(t *testing.T) {
	p := testpki.New(t)
	srv := newServer(t, transport(p), "")

	t.Run("client offers h3", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), guard)
		defer cancel()
		cfg := p.ClientConfig()
		cfg.NextProtos = []string{"h3"}
		qc, err := quicgo.DialAddr(ctx, srv.Addr(), cfg, nil)
		if err == nil {
			qc.CloseWithError(0, "")
			t.Fatal("a client offering h3 was served")
		}
		if !strings.Contains(err.Error(), "application protocol") {
			t.Errorf("dial: %v", err)
		}
	})
	t.Run("server speaks h3", func(t *testing.T) {
		cfg := p.ServerConfig()
		cfg.NextProtos = []string{"h3"}
		ql, err := quicgo.ListenAddr("127.0.0.1:0", cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ql.Close()
		ctx, cancel := context.WithTimeout(t.Context(), guard)
		defer cancel()
		conn, err := transport(p).Dial(ctx, ql.Addr().String())
		if err == nil {
			conn.Close()
			t.Fatal("Dial to an h3 server succeeded")
		}
		if !errors.Is(err, runtime.ErrNotSent) || !strings.Contains(err.Error(), "application protocol") {
			t.Errorf("Dial: %v", err)
		}
	})
}

// TestInsecureSelfSigned: nodes that both use WithInsecureSelfSigned talk;
// a client that verifies certificates refuses the self-signed server.
func TestInsecureSelfSigned(t *testing.T) {
	tr := quic.New(quic.WithInsecureSelfSigned())
	srv := newServer(t, tr, "")
	mustAdd(t, srv, "role:math,cmd:neg", neg)
	cl := newClient(t, tr, "role:math,cmd:neg", srv.Addr())
	c := runtime.NewClient[wrapperspb.Int64Value, wrapperspb.Int64Value](cl, "role:math,cmd:neg")
	if r, err := c.Call(t.Context(), wrapperspb.Int64(5)); err != nil || r.GetValue() != -5 {
		t.Fatalf("neg = %v, %v", r, err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	conn, err := quic.New(quic.WithClientTLS(&tls.Config{RootCAs: testpki.New(t).Pool})).Dial(ctx, srv.Addr())
	if err == nil {
		conn.Close()
		t.Fatal("a verifying client accepted a self-signed server")
	}
	if !errors.Is(err, runtime.ErrNotSent) {
		t.Errorf("Dial: %v", err)
	}
}

// TestRemoteReconnect stops a server and starts a new one on the same UDP
// port: the client reconnects by itself and later calls succeed.
func TestRemoteReconnect(t *testing.T) {
	tr := transport(testpki.New(t))
	start := func(addr, gen string) *runtime.Node {
		t.Helper()
		n := newServer(t, tr, addr)
		mustAdd(t, n, "role:r,cmd:who", func(ctx context.Context, r runtime.Request) (any, error) { return gen, nil })
		mustAdd(t, n, "role:r,gen:"+gen, func(ctx context.Context, r runtime.Request) (any, error) { return gen, nil })
		return n
	}
	who := func(cl *runtime.Node) (any, error) {
		res, err := cl.ActE(t.Context(), "role:r,cmd:who", nil)
		return res.Value(), err
	}

	s1 := start("", "1")
	addr := s1.Addr()
	cl := newClient(t, tr, "role:r,gen:1", addr)
	if got, err := who(cl); got != "1" || err != nil {
		t.Fatalf("first server: %v, %v", got, err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}

	start(addr, "2")
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	if err := cl.WaitFor(ctx, "role:r,gen:2"); err != nil {
		t.Fatalf("the client never reached the restarted server: %v; routes %v", err, cl.Patterns())
	}
	for range 3 {
		if got, err := who(cl); got != "2" || err != nil {
			t.Fatalf("restarted server: %v, %v", got, err)
		}
	}
}

// TestRemoteGracefulShutdown shuts a server down while a call runs on it:
// Shutdown waits for that call, which succeeds.
func TestRemoteGracefulShutdown(t *testing.T) {
	tr := transport(testpki.New(t))
	srv := newServer(t, tr, "")
	started, release := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open) // before the nodes close, so a failing test does not hang
	mustAdd(t, srv, "role:slow,cmd:run", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-release
		return "done", nil
	})
	cl := newClient(t, tr, "role:slow,cmd:run", srv.Addr())

	type result struct {
		v   any
		err error
	}
	res := make(chan result, 1)
	go func() {
		r, err := cl.ActE(t.Context(), "role:slow,cmd:run", nil)
		res <- result{r.Value(), err}
	}()
	testwait.Recv(t, started)
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a call in flight", err)
	case r := <-res:
		t.Fatalf("the call ended early: %v, %v", r.v, r.err)
	default:
	}
	open()
	if r := testwait.Recv(t, res); r.v != "done" || r.err != nil {
		t.Errorf("call in flight: %v, %v", r.v, r.err)
	}
	if err := testwait.Recv(t, shut); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// TestNoGoroutineLeaks runs calls of every kind, closes the nodes and
// checks that their goroutines are gone.
func TestNoGoroutineLeaks(t *testing.T) {
	checkLeaks := leak.Mark(t)
	func() {
		tr := transport(testpki.New(t))
		srv, err := runtime.New(runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"))
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
		cl, err := runtime.New(runtime.WithTransport(tr), runtime.WithDiscovery(runtime.StaticPeers(srv.Addr())))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(t.Context(), guard)
		defer cancel()
		if err := cl.WaitFor(ctx, "role:leak,cmd:block"); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.ActE(ctx, "role:leak,cmd:ok", wrapperspb.Int64(1)); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.ActE(ctx, "role:leak,cmd:ok", nil, runtime.NoReply()); err != nil {
			t.Fatal(err)
		}
		cctx, cancelCall := context.WithCancel(ctx)
		go func() { <-blocked; cancelCall() }()
		if _, err := cl.ActE(cctx, "role:leak,cmd:block", nil); runtime.CodeOf(err) != runtime.CodeCanceled {
			t.Fatalf("cancelled call: %v", err)
		}
		// A call in flight when the nodes close.
		go cl.ActE(ctx, "role:leak,cmd:block", nil)
		testwait.Recv(t, blocked)
	}()
	checkLeaks()
}
