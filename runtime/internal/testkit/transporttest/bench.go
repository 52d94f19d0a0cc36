package transporttest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpb"
	"github.com/wizardmesh/wizard/runtime/lb"
)

// MathService is the server side of the benchmarks, a
// [testpb.MathServiceHandler]: its Sum adds the values.
type MathService struct {
	testpb.UnimplementedMathServiceHandler
}

// Sum returns the sum of r's values.
func (MathService) Sum(ctx context.Context, r *testpb.SumRequest) (*testpb.SumResponse, error) {
	var s float64
	for _, v := range r.GetValues() {
		s += v
	}
	return &testpb.SumResponse{Sum: s}, nil
}

// Benchmark is a generated client's call over loopback through the
// transports newTransport makes: typed protobuf request and response, one
// connection, client and server nodes in this process; then the same call
// with breakers, through ActE, in parallel, and through Act with a map.
func Benchmark(b *testing.B, newTransport NewTransport) {
	srv := NewServer(b, newTransport(b, discard))
	if err := testpb.RegisterMathServiceHandler(srv, MathService{}); err != nil {
		b.Fatal(err)
	}
	cl := NewClient(b, newTransport(b, discard), testpb.MathServiceSumPattern, nil, srv.Addr())
	math := MathClient(b, cl)
	req := &testpb.SumRequest{Values: []float64{1, 2}}
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
		clb := NewClient(b, newTransport(b, discard), testpb.MathServiceSumPattern, []runtime.Option{runtime.WithBreakers(func(t *runtime.Target) runtime.Breaker { return br.Get(t) })}, srv.Addr())
		mathb := MathClient(b, clb)
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
			var out testpb.SumResponse
			b.ReportAllocs()
			for b.Loop() {
				res, err := cl.ActE(ctx, testpb.MathServiceSumPattern, req, opts...)
				if err != nil {
					b.Fatal(err)
				}
				if err := res.Decode(&out); err != nil || out.GetSum() != 3 {
					b.Fatal(&out, err)
				}
			}
		})
	}
	// GOMAXPROCS callers, then 64 per P (many callers per CPU, as a busy
	// service sees them): their frames share writes.
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
			var out testpb.SumResponse
			if err := res.Decode(&out); err != nil || out.GetSum() != 3 {
				b.Fatal(&out, err)
			}
		}
	})
}
