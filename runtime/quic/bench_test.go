package quic_test

import (
	"log/slog"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpki"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/quic"
)

// BenchmarkRemoteCall is the suite's benchmark over loopback QUIC: one
// connection with the default streams.
func BenchmarkRemoteCall(b *testing.B) {
	p := testpki.New(b)
	transporttest.Benchmark(b, func(t testing.TB, log *slog.Logger) runtime.Transport {
		return transport(t, p, quic.WithLogger(log))
	})
}

// BenchmarkStreams is the suite's stream benchmark over loopback QUIC:
// wizard streams multiplexed on the connection's QUIC streams.
func BenchmarkStreams(b *testing.B) {
	p := testpki.New(b)
	transporttest.BenchmarkStreams(b, func(t testing.TB, log *slog.Logger) runtime.Transport {
		return transport(t, p, quic.WithLogger(log))
	})
}
