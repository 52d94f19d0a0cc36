package nats_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/natstest"
	"github.com/wizardmesh/wizard/runtime/nats"
	conformance "github.com/wizardmesh/wizard/runtime/transporttest"
)

// newTransport returns a transport of the broker at url made with opts,
// which must be valid.
func newTransport(t testing.TB, url string, opts ...nats.Option) *nats.Transport {
	t.Helper()
	tr, err := nats.New(append([]nats.Option{nats.WithURL(url), nats.WithReconnect(20*time.Millisecond, 0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestConformance runs the transport conformance suite over NATS, all
// nodes through one embedded broker.
func TestConformance(t *testing.T) {
	b := natstest.Start(t)
	conformance.Run(t, func(t testing.TB, log *slog.Logger) runtime.Transport {
		return newTransport(t, b.URL(), nats.WithLogger(log))
	})
}
