package tcp_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpb"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/lb"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// BenchmarkRemoteCall is the suite's benchmark over loopback TCP.
func BenchmarkRemoteCall(b *testing.B) {
	transporttest.Benchmark(b, func(t testing.TB, log *slog.Logger) runtime.Transport {
		return newTransport(t, tcp.WithLogger(log))
	})
}

// BenchmarkStreams is the suite's stream benchmark over loopback TCP.
func BenchmarkStreams(b *testing.B) {
	transporttest.BenchmarkStreams(b, func(t testing.TB, log *slog.Logger) runtime.Transport {
		return newTransport(t, tcp.WithLogger(log))
	})
}

// BenchmarkBreakerCost measures what a failsafe-go breaker per target adds
// to a remote call, paired: two clients of the same server, one with
// breakers, take turns in rounds of 100 calls, so that drift in the
// machine's load falls on both alike. It reports each client's ns per
// call and their ratio.
func BenchmarkBreakerCost(b *testing.B) {
	srv := newServer(b)
	if err := testpb.RegisterMathServiceHandler(srv, transporttest.MathService{}); err != nil {
		b.Fatal(err)
	}
	br, err := lb.NewBreakers[*runtime.Target]()
	if err != nil {
		b.Fatal(err)
	}
	plain := transporttest.MathClient(b, newClient(b, testpb.MathServiceSumPattern, srv.Addr()))
	withBreakers := transporttest.MathClient(b, newClientWith(b, testpb.MathServiceSumPattern,
		[]runtime.Option{runtime.WithBreakers(func(t *runtime.Target) runtime.Breaker { return br.Get(t) })}, srv.Addr()))
	req := &testpb.SumRequest{Values: []float64{1, 2}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	const round = 100
	var spent [2]time.Duration
	calls := 0
	clients := []testpb.MathServiceClient{plain, withBreakers}
	for b.Loop() {
		for j := range clients {
			i := (j + calls/round) % 2 // who goes first alternates
			c := clients[i]
			start := time.Now()
			for range round {
				if res, err := c.Sum(ctx, req); err != nil || res.GetSum() != 3 {
					b.Fatal(res, err)
				}
			}
			spent[i] += time.Since(start)
		}
		calls += round
	}
	b.ReportMetric(float64(spent[0].Nanoseconds())/float64(calls), "ns/call-plain")
	b.ReportMetric(float64(spent[1].Nanoseconds())/float64(calls), "ns/call-breakers")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "ratio")
}
