package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/gateway/auth"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// guard bounds every wait of these tests.
const guard = 30 * time.Second

// recv receives from ch within the guard.
func recv[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(guard)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %v waiting on a %T channel", guard, *new(T))
		panic("unreachable")
	}
}

// until polls cond until it holds, within the guard.
func until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > guard {
			t.Fatalf("after %v: %s", guard, what)
		}
		time.Sleep(2 * time.Millisecond) // a polling interval, not synchronisation
	}
}

// quiet is a logger that drops everything.
var quiet = slog.New(slog.DiscardHandler)

// newNode starts a TCP node on 127.0.0.1 with opts.
func newNode(t testing.TB, opts ...runtime.Option) *runtime.Node {
	t.Helper()
	tr, err := tcp.New(tcp.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	n, err := runtime.New(append([]runtime.Option{runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"), runtime.WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// backend is the mesh behind a test gateway: handlers on a service
// node, an overloaded node (one call in flight at most), and a node the
// gateway's breaker holds open.
type backend struct {
	svc, busy, broken *runtime.Node
	slowStarted       chan struct{} // a slow handler started
	slowDone          chan error    // a slow handler saw its ctx end (ctx.Err())
	holdStarted       chan struct{}
	releaseOne        chan struct{} // lets one held call return
	release           chan struct{} // closed at the end: lets every held call return
	mu                sync.Mutex
	lastMeta          []string // not carried by the runtime yet
}

func newBackend(t testing.TB) *backend {
	b := &backend{
		slowStarted: make(chan struct{}, 16), slowDone: make(chan error, 16),
		holdStarted: make(chan struct{}, 16), release: make(chan struct{}), releaseOne: make(chan struct{}, 16),
	}
	b.svc = newNode(t)
	add := func(n *runtime.Node, pattern string, h runtime.Handler) {
		t.Helper()
		if err := n.Add(pattern, h); err != nil {
			t.Fatal(err)
		}
	}
	add(b.svc, "role:t,cmd:echo", func(ctx context.Context, req runtime.Request) (any, error) {
		return req.Msg(), nil
	})
	// Narrower than echo: only the route's pattern may route, never a
	// field of the client's (TestClientFieldsDoNotRoute).
	add(b.svc, "role:t,cmd:echo,admin:true", func(ctx context.Context, req runtime.Request) (any, error) {
		return map[string]any{"narrower": true}, nil
	})
	add(b.svc, "role:t,cmd:slow", func(ctx context.Context, req runtime.Request) (any, error) {
		b.slowStarted <- struct{}{}
		<-ctx.Done()
		b.slowDone <- ctx.Err()
		return nil, ctx.Err()
	})
	add(b.svc, "role:t,cmd:meta", func(ctx context.Context, req runtime.Request) (any, error) {
		out := map[string]any{}
		for k, v := range runtime.IncomingMetadata(ctx).All() {
			out[k] = v
		}
		if dl, ok := ctx.Deadline(); ok {
			out["deadline_ms"] = time.Until(dl).Milliseconds()
		}
		return out, nil
	})
	add(b.svc, "role:t,cmd:big", func(ctx context.Context, req runtime.Request) (any, error) {
		n, _ := req.Int64("n")
		return map[string]any{"big": strings.Repeat("x", int(n))}, nil
	})
	add(b.svc, "role:t,cmd:panic", func(ctx context.Context, req runtime.Request) (any, error) {
		panic("the handler's secret")
	})
	add(b.svc, "role:t,cmd:err", func(ctx context.Context, req runtime.Request) (any, error) {
		name, _ := req.String("code")
		for c := runtime.CodeOK; c <= runtime.CodeUnauthenticated; c++ {
			if c.String() == name {
				return nil, runtime.NewError(c, "handler says "+name)
			}
		}
		return nil, errors.New("a plain error: " + name)
	})
	b.busy = newNode(t, runtime.WithMaxInFlight(1))
	add(b.busy, "role:t,cmd:busy", func(ctx context.Context, req runtime.Request) (any, error) {
		if hold, _ := req.Bool("hold"); hold {
			b.holdStarted <- struct{}{}
			select {
			case <-b.releaseOne:
			case <-b.release:
			case <-ctx.Done():
			}
		}
		return map[string]any{"ok": true}, nil
	})
	b.broken = newNode(t)
	add(b.broken, "role:t,cmd:broken", func(ctx context.Context, req runtime.Request) (any, error) {
		return map[string]any{"ok": true}, nil
	})
	t.Cleanup(func() {
		select {
		case <-b.release:
		default:
			close(b.release)
		}
	})
	return b
}

// shutBreaker is the breaker of a target the gateway's node must not
// call: open, always.
type shutBreaker struct{}

func (shutBreaker) Allow() bool { return false }
func (shutBreaker) Success()    {}
func (shutBreaker) Failure()    {}
func (shutBreaker) Open()       {}

type noBreaker struct{}

func (noBreaker) Allow() bool { return true }
func (noBreaker) Success()    {}
func (noBreaker) Failure()    {}
func (noBreaker) Open()       {}

// gatewayNode is the gateway's node, peered with the backend's nodes
// (and the extra ones), its breaker for the broken node open; it returns
// once it routes every backend pattern.
func gatewayNode(t testing.TB, b *backend, extra ...string) *runtime.Node {
	t.Helper()
	brokenAddr := b.broken.Addr()
	n := newNode(t,
		runtime.WithDiscovery(runtime.StaticPeers(append([]string{b.svc.Addr(), b.busy.Addr(), b.broken.Addr()}, extra...)...)),
		runtime.WithBreakers(func(tg *runtime.Target) runtime.Breaker {
			if tg.Addr() == brokenAddr {
				return shutBreaker{}
			}
			return noBreaker{}
		}))
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	for _, p := range []string{"role:t,cmd:echo", "role:t,cmd:busy", "role:t,cmd:broken"} {
		if err := n.WaitFor(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// testVerifier knows a few tokens.
type testVerifier map[string]*auth.Identity

func (v testVerifier) Verify(ctx context.Context, token string) (*auth.Identity, error) {
	if id := v[token]; id != nil {
		if !id.ExpiresAt.IsZero() && time.Now().After(id.ExpiresAt) {
			return nil, auth.ErrExpired
		}
		return id, nil
	}
	return nil, auth.ErrRejected
}

var tokens = testVerifier{
	"good":    {Subject: "u1", Issuer: "test", Scopes: []string{"read"}},
	"admin":   {Subject: "u2", Issuer: "test", Scopes: []string{"read", "admin"}},
	"limited": {Subject: "limited", Issuer: "test"},
}

// testRoutes are the routes of the status table's gateway.
func testRoutes() testTable {
	return testTable{
		route("GET,POST", "/echo", "role:t,cmd:echo", policy{auth: authOptional}),
		route("GET", "/absent", "role:t,cmd:absent", policy{auth: authNone}),
		route("GET", "/slow", "role:t,cmd:slow", policy{auth: authNone, timeout: 100 * time.Millisecond, maxTimeout: 10 * time.Second}),
		route("GET", "/busy", "role:t,cmd:busy", policy{auth: authNone}),
		route("GET", "/broken", "role:t,cmd:broken", policy{auth: authNone}),
		route("GET,POST", "/meta", "role:t,cmd:meta", policy{auth: authOptional, timeout: 3 * time.Second}),
		route("GET", "/big", "role:t,cmd:big", policy{auth: authNone}),
		route("GET", "/panic", "role:t,cmd:panic", policy{auth: authNone}),
		route("GET", "/err", "role:t,cmd:err", policy{auth: authNone}),
		route("GET,POST", "/private", "role:t,cmd:echo", policy{auth: authRequired}),
		route("GET", "/optscoped", "role:t,cmd:echo", policy{auth: authOptional, scopes: []string{"admin"}}),
		route("GET", "/admin", "role:t,cmd:echo", policy{auth: authRequired, scopes: []string{"admin"}}),
	}
}

// testGateway is a gateway serving on 127.0.0.1 in front of a backend.
type testGateway struct {
	*Gateway
	b    *backend
	base string // http://127.0.0.1:port
	ws   string // ws://127.0.0.1:port/ws
	logs *logBuffer
}

func newTestGateway(t testing.TB, set settings, opts ...Option) *testGateway {
	t.Helper()
	b := newBackend(t)
	return newTestGatewayOn(t, b, gatewayNode(t, b), testRoutes(), set, opts...)
}

func newTestGatewayOn(t testing.TB, b *backend, node *runtime.Node, tbl table, set settings, opts ...Option) *testGateway {
	t.Helper()
	if set.ws.path == "" {
		set.ws.path = "/ws"
	}
	set.accessLog = true
	logs := &logBuffer{}
	opts = append([]Option{WithLogger(slog.New(logs)), WithVerifier(tokens)}, opts...)
	g, err := newGateway(node, tbl, set, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return serveTestGateway(t, g, b, logs)
}

// serveTestGateway serves g on 127.0.0.1 until the test ends.
func serveTestGateway(t testing.TB, g *Gateway, b *backend, logs *logBuffer) *testGateway {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- g.Serve(ln) }()
	t.Cleanup(func() {
		g.Close()
		if err := recv(t, served); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})
	return &testGateway{Gateway: g, b: b, base: "http://" + ln.Addr().String(), ws: "ws://" + ln.Addr().String() + g.set.ws.path, logs: logs}
}

// logBuffer is a slog.Handler keeping records, for the access log's
// tests.
type logBuffer struct {
	mu   sync.Mutex
	recs []map[string]any
}

func (l *logBuffer) Enabled(context.Context, slog.Level) bool { return true }
func (l *logBuffer) Handle(_ context.Context, r slog.Record) error {
	m := map[string]any{"msg": r.Message, "level": r.Level.String()}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.Any(); return true })
	l.mu.Lock()
	l.recs = append(l.recs, m)
	l.mu.Unlock()
	return nil
}
func (l *logBuffer) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logBuffer) WithGroup(string) slog.Handler      { return l }

// find returns the records whose message starts with msg and whose attrs
// include kv.
func (l *logBuffer) find(msg string, kv ...any) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
next:
	for _, r := range l.recs {
		if !strings.HasPrefix(r["msg"].(string), msg) {
			continue
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if r[kv[i].(string)] != kv[i+1] {
				continue next
			}
		}
		out = append(out, r)
	}
	return out
}
