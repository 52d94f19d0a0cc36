package tcp_test

import (
	"log/slog"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/tcp"
	conformance "github.com/wizardmesh/wizard/runtime/transporttest"
)

// newTransport returns a TCP transport made with opts, which must be
// valid.
func newTransport(t testing.TB, opts ...tcp.Option) *tcp.Transport {
	t.Helper()
	tr, err := tcp.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// newServer starts a node serving on 127.0.0.1 with the given handlers.
// A transport among opts replaces the default one.
func newServer(t testing.TB, opts ...runtime.Option) *runtime.Node {
	t.Helper()
	return transporttest.NewServer(t, newTransport(t), opts...)
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
	return transporttest.NewClient(t, newTransport(t), pattern, opts, addrs...)
}

// TestConformance runs the transport conformance suite over TCP.
func TestConformance(t *testing.T) {
	conformance.Run(t, func(t testing.TB, log *slog.Logger) runtime.Transport {
		return newTransport(t, tcp.WithLogger(log))
	})
}
