package transporttest

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpb"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/introspect"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// NewTransport makes a transport whose records go to log (never nil).
// Transports that the same test makes must talk to one another: with TLS,
// they share a CA.
type NewTransport func(t testing.TB, log *slog.Logger) runtime.Transport

// discard is the logger of transports whose records no test reads.
var discard = slog.New(slog.DiscardHandler)

// TypedClient is runtime.NewClient, failing t on an error.
func TypedClient[Req, Res any](t testing.TB, c runtime.Caller, pattern string, opts ...runtime.CallOption) *runtime.Client[Req, Res] {
	t.Helper()
	cl, err := runtime.NewClient[Req, Res](c, pattern, opts...)
	if err != nil {
		t.Fatalf("NewClient(%q): %v", pattern, err)
	}
	return cl
}

// MathClient is testpb.NewMathServiceClient, failing t on an error.
func MathClient(t testing.TB, c runtime.Caller, opts ...runtime.CallOption) testpb.MathServiceClient {
	t.Helper()
	cl, err := testpb.NewMathServiceClient(c, opts...)
	if err != nil {
		t.Fatalf("NewMathServiceClient: %v", err)
	}
	return cl
}

// NewNode starts a node that is closed when the test ends.
func NewNode(t testing.TB, opts ...runtime.Option) *runtime.Node {
	t.Helper()
	n, err := runtime.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// NewServer starts a node of tr listening on 127.0.0.1. A transport or a
// listen address among opts replaces the default one.
func NewServer(t testing.TB, tr runtime.Transport, opts ...runtime.Option) *runtime.Node {
	t.Helper()
	return NewNode(t, append([]runtime.Option{runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0")}, opts...)...)
}

// NewClient starts a node of tr that calls addrs, refreshing their
// catalogs every 50ms, and waits until pattern is routable. A transport or
// a refresh among opts replaces the default one.
func NewClient(t testing.TB, tr runtime.Transport, pattern string, opts []runtime.Option, addrs ...string) *runtime.Node {
	t.Helper()
	n := NewNode(t, append([]runtime.Option{runtime.WithTransport(tr), runtime.WithDiscovery(runtime.StaticPeers(addrs...)), runtime.WithCatalogRefresh(50 * time.Millisecond)}, opts...)...)
	WaitRoutable(t, n, pattern)
	return n
}

// WaitRoutable waits until n routes pattern, failing t after the
// [testwait.Guard].
func WaitRoutable(t testing.TB, n *runtime.Node, pattern string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Guard)
	defer cancel()
	if err := n.WaitFor(ctx, pattern); err != nil {
		t.Fatalf("pattern %q never became routable: %v; have %v", pattern, err, n.Patterns())
	}
}

// Routes reports whether n routes exactly pat (local or remote).
func Routes(n *runtime.Node, pat string) bool {
	p := pattern.MustParse(pat)
	return slices.ContainsFunc(n.Patterns(), func(pi introspect.PatternInfo) bool { return pi.Pattern.Equal(p) })
}

// MustAdd adds h to n under pattern, failing t on error.
func MustAdd(t testing.TB, n *runtime.Node, pattern string, h runtime.Handler) {
	t.Helper()
	if err := n.Add(pattern, h); err != nil {
		t.Fatal(err)
	}
}

// WantCode fails t unless err carries the code want.
func WantCode(t testing.TB, err error, want runtime.Code) {
	t.Helper()
	if got := runtime.CodeOf(err); got != want {
		t.Fatalf("code %v (err %v), want %v", got, err, want)
	}
}

// FreeAddr returns a loopback address whose TCP port was free a moment
// ago: an address to restart a server on, or a peer that does not answer.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Outcome is how a call made by ActAsync ended.
type Outcome struct {
	V   any // the result's value
	Err error
}

// ActAsync calls pattern from cl in the background; the channel gets the
// call's outcome.
func ActAsync(ctx context.Context, cl *runtime.Node, pattern string) <-chan Outcome {
	done := make(chan Outcome, 1)
	go func() {
		res, err := cl.ActE(ctx, pattern, nil)
		done <- Outcome{res.Value(), err}
	}()
	return done
}
