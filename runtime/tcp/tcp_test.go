package tcp_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// newServer starts a node serving on 127.0.0.1 with the given handlers.
// A transport among opts replaces the default one.
func newServer(t testing.TB, opts ...runtime.Option) *runtime.Node {
	t.Helper()
	return newNode(t, append([]runtime.Option{runtime.WithTransport(tcp.New()), runtime.WithListen("127.0.0.1:0")}, opts...)...)
}

// newClient starts a node that calls addrs, and waits until pattern is routable.
func newClient(t testing.TB, pattern string, addrs ...string) *runtime.Node {
	t.Helper()
	return newClientWith(t, pattern, nil, addrs...)
}

// newClientWith is newClient with more options (a transport among them
// replaces the default one).
func newClientWith(t testing.TB, pattern string, opts []runtime.Option, addrs ...string) *runtime.Node {
	t.Helper()
	n := newNode(t, append([]runtime.Option{runtime.WithTransport(tcp.New()), runtime.WithDiscovery(runtime.StaticPeers(addrs...)), runtime.WithCatalogRefresh(50 * time.Millisecond)}, opts...)...)
	waitRoutable(t, n, pattern)
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

func waitRoutable(t testing.TB, n *runtime.Node, pattern string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.WaitFor(ctx, pattern); err != nil {
		t.Fatalf("pattern %q never became routable: %v; have %v", pattern, err, n.Patterns())
	}
}

// waitUntil polls cond, for conditions that no event announces; the
// deadline is a guard only.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// routes reports whether n routes exactly pattern (local or remote).
func routes(n *runtime.Node, pattern string) bool {
	p := runtime.MustParsePattern(pattern)
	return slices.ContainsFunc(n.Patterns(), func(pi runtime.PatternInfo) bool { return pi.Pattern.Equal(p) })
}

func mustAdd(t testing.TB, n *runtime.Node, pattern string, h runtime.Handler) {
	t.Helper()
	if err := n.Add(pattern, h); err != nil {
		t.Fatal(err)
	}
}

// gate is a channel that blocked handlers wait on. It opens by Open or,
// at the latest, when the test ends (before its nodes close, so that a
// failing test does not hang in Close).
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func newGate(t testing.TB) *gate {
	g := &gate{ch: make(chan struct{})}
	t.Cleanup(g.Open)
	return g
}

func (g *gate) Open()              { g.once.Do(func() { close(g.ch) }) }
func (g *gate) C() <-chan struct{} { return g.ch }

// freeAddr returns a loopback address whose port was free a moment ago,
// to restart a server on the same address.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func wantCode(t testing.TB, err error, want runtime.Code) {
	t.Helper()
	if got := runtime.CodeOf(err); got != want {
		t.Fatalf("code %v (err %v), want %v", got, err, want)
	}
}

// logSink records log lines ("message key=value ...") and announces the
// first line containing a given string: the events of a connection's life
// that the API does not expose (a goaway reaching a client, a connection
// closed for bad input).
type logSink struct {
	mu    sync.Mutex
	lines []string
	waits []logWait
}

type logWait struct {
	substrs []string
	ch      chan struct{}
}

func (w logWait) match(line string) bool {
	for _, s := range w.substrs {
		if !strings.Contains(line, s) {
			return false
		}
	}
	return true
}

func (s *logSink) logger() *slog.Logger { return slog.New(logHandler{sink: s}) }

// seen returns a channel closed once a line containing every one of
// substrs is logged.
func (s *logSink) seen(substrs ...string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	w := logWait{substrs, ch}
	for _, l := range s.lines {
		if w.match(l) {
			close(ch)
			return ch
		}
	}
	s.waits = append(s.waits, w)
	return ch
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

func (s *logSink) add(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, line)
	s.waits = slices.DeleteFunc(s.waits, func(w logWait) bool {
		if w.match(line) {
			close(w.ch)
			return true
		}
		return false
	})
}

type logHandler struct {
	sink  *logSink
	attrs []slog.Attr
}

func (h logHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h logHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	write := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	h.sink.add(b.String())
	return nil
}

func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{sink: h.sink, attrs: append(slices.Clip(h.attrs), as...)}
}

func (h logHandler) WithGroup(string) slog.Handler { return h }

func TestRemoteRoundTrip(t *testing.T) {
	srv := newServer(t)
	if err := srv.Add("role:math,cmd:sum", func(ctx context.Context, r runtime.Request) (any, error) {
		return map[string]any{"r": r.Get("a").(float64) + r.Get("b").(float64)}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Add("role:math,cmd:neg", runtime.NewUnaryHandler(func(ctx context.Context, r *wrapperspb.Int64Value) (*wrapperspb.Int64Value, error) {
		return wrapperspb.Int64(-r.GetValue()), nil
	})); err != nil {
		t.Fatal(err)
	}
	if err := srv.Add("role:math,cmd:fail", func(ctx context.Context, r runtime.Request) (any, error) {
		return nil, runtime.Errorf(runtime.CodeFailedPrecondition, "no can do")
	}); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, "role:math,cmd:fail", srv.Addr())

	res, err := cl.Act(t.Context(), "role:math,cmd:sum", map[string]any{"a": 1, "b": 2})
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ R float64 }
	if err := res.Decode(&out); err != nil || out.R != 3 {
		t.Fatalf("sum = %+v, %v", out, err)
	}

	neg := runtime.NewClient[wrapperspb.Int64Value, wrapperspb.Int64Value](cl, "role:math,cmd:neg")
	r, err := neg.Call(t.Context(), wrapperspb.Int64(7))
	if err != nil || r.GetValue() != -7 {
		t.Fatalf("neg = %v, %v", r, err)
	}

	_, err = cl.Act(t.Context(), "role:math,cmd:fail", nil)
	if runtime.CodeOf(err) != runtime.CodeFailedPrecondition || err.Error() != "no can do" {
		t.Fatalf("fail: code %v, err %v", runtime.CodeOf(err), err)
	}
	_, err = cl.Act(t.Context(), "role:math,cmd:nope", nil)
	if !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("nope: %v", err)
	}
}
