package tcp_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/lb"
)

// mathService is the server side of the benchmark.
type mathService struct {
	mathv1.UnimplementedMathServiceHandler
}

func (mathService) Sum(ctx context.Context, r *mathv1.SumRequest) (*mathv1.SumResponse, error) {
	var s float64
	for _, v := range r.GetValues() {
		s += v
	}
	return &mathv1.SumResponse{Sum: s}, nil
}

// BenchmarkRemoteCall is a generated client's call over loopback TCP:
// typed protobuf request and response, one connection, client and server
// nodes in this process.
func BenchmarkRemoteCall(b *testing.B) {
	srv := newServer(b)
	if err := mathv1.RegisterMathServiceHandler(srv, mathService{}); err != nil {
		b.Fatal(err)
	}
	cl := newClient(b, mathv1.MathServiceSumPattern, srv.Addr())
	math := mathv1.NewMathServiceClient(cl)
	req := &mathv1.SumRequest{Values: []float64{1, 2}}
	call := func(ctx context.Context) {
		res, err := math.Sum(ctx, req)
		if err != nil || res.GetSum() != 3 {
			b.Fatal(res, err)
		}
	}

	// The caller's ctx has no deadline: the default timeout applies.
	b.Run("serial", func(b *testing.B) {
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			call(ctx)
		}
	})
	// The caller's ctx has a deadline: it travels as is.
	b.Run("serial_deadline", func(b *testing.B) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		b.ReportAllocs()
		for b.Loop() {
			call(ctx)
		}
	})
	// The same call with a failsafe-go breaker per target (runtime/lb): a
	// permit taken and given back on every call.
	b.Run("serial_deadline_breakers", func(b *testing.B) {
		br, err := lb.NewBreakers[*runtime.Target]()
		if err != nil {
			b.Fatal(err)
		}
		clb := newClientWith(b, mathv1.MathServiceSumPattern, []runtime.Option{runtime.WithBreakers(func(t *runtime.Target) runtime.Breaker { return br.Get(t) })}, srv.Addr())
		mathb := mathv1.NewMathServiceClient(clb)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		b.ReportAllocs()
		for b.Loop() {
			res, err := mathb.Sum(ctx, req)
			if err != nil || res.GetSum() != 3 {
				b.Fatal(res, err)
			}
		}
	})
	// The same call through ActE, idempotent (as the generated Sum is) and
	// not: the second carries a call id and the server keeps its answer
	// for de-duplication; the pair shows what that costs.
	for _, dedup := range []bool{false, true} {
		name, opts := "serial_deadline_acte", []runtime.CallOption{runtime.Idempotent()}
		if dedup {
			name, opts = "serial_deadline_dedup", nil
		}
		b.Run(name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			var out mathv1.SumResponse
			b.ReportAllocs()
			for b.Loop() {
				res, err := cl.ActE(ctx, mathv1.MathServiceSumPattern, req, opts...)
				if err != nil {
					b.Fatal(err)
				}
				if err := res.Decode(&out); err != nil || out.GetSum() != 3 {
					b.Fatal(&out, err)
				}
			}
		})
	}
	// GOMAXPROCS callers, then 64 per P: their frames share writes.
	for _, perP := range []int{1, 64} {
		name := "parallel"
		if perP > 1 {
			name = fmt.Sprintf("parallel_%dperP", perP)
		}
		b.Run(name, func(b *testing.B) {
			b.SetParallelism(perP)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					call(ctx)
				}
			})
		})
	}
	// Act with a map: the dynamic path, JSON on the wire.
	b.Run("act_map", func(b *testing.B) {
		ctx := context.Background()
		msg := map[string]any{"values": []float64{1, 2}}
		b.ReportAllocs()
		for b.Loop() {
			res, err := cl.Act(ctx, "role:math,cmd:sum", msg)
			if err != nil {
				b.Fatal(err)
			}
			var out mathv1.SumResponse
			if err := res.Decode(&out); err != nil || out.GetSum() != 3 {
				b.Fatal(&out, err)
			}
		}
	})
}

// BenchmarkBreakerCost measures what a failsafe-go breaker per target adds
// to a remote call, paired: two clients of the same server, one with
// breakers, take turns in rounds of 100 calls, so that drift in the
// machine's load falls on both alike. It reports each client's ns per
// call and their ratio.
func BenchmarkBreakerCost(b *testing.B) {
	srv := newServer(b)
	if err := mathv1.RegisterMathServiceHandler(srv, mathService{}); err != nil {
		b.Fatal(err)
	}
	br, err := lb.NewBreakers[*runtime.Target]()
	if err != nil {
		b.Fatal(err)
	}
	plain := mathv1.NewMathServiceClient(newClient(b, mathv1.MathServiceSumPattern, srv.Addr()))
	withBreakers := mathv1.NewMathServiceClient(newClientWith(b, mathv1.MathServiceSumPattern,
		[]runtime.Option{runtime.WithBreakers(func(t *runtime.Target) runtime.Breaker { return br.Get(t) })}, srv.Addr()))
	req := &mathv1.SumRequest{Values: []float64{1, 2}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	const round = 100
	var spent [2]time.Duration
	calls := 0
	clients := []mathv1.MathServiceClient{plain, withBreakers}
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
