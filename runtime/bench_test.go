package runtime_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/cputime"

	"google.golang.org/protobuf/types/known/wrapperspb"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	"github.com/wizardmesh/wizard/runtime"
)

type sumRequest struct{ A, B float64 }
type sumResponse struct{ R float64 }

func newBenchNode(b *testing.B) *runtime.Node {
	b.Helper()
	n := newTestNode(b)
	resp := &sumResponse{}
	mustAdd(b, n, "role:math,cmd:sum", runtime.NewUnaryHandler(func(ctx context.Context, r *sumRequest) (*sumResponse, error) {
		resp.R = r.A + r.B
		return resp, nil
	}))
	// Neighbours, so the router is not trivially small.
	for i := range 50 {
		mustAdd(b, n, fmt.Sprintf("role:svc%d,cmd:get", i), func(context.Context, runtime.Request) (any, error) { return nil, nil })
	}
	return n
}

// BenchmarkActE_Precomputed is the generated-client path: a pre-parsed
// pattern and a typed request, in-process.
func BenchmarkActE_Precomputed(b *testing.B) {
	n := newBenchNode(b)
	c := newClient[sumRequest, sumResponse](b, n, "role:math,cmd:sum")
	ctx := context.Background()
	req := &sumRequest{A: 1, B: 2}
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		res, err := c.Call(ctx, req)
		if err != nil || res.R != 3 {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkActE_Metadata: the generated-client path with two metadata
// pairs on ctx: the handler gets a ctx of its own carrying them.
func BenchmarkActE_Metadata(b *testing.B) {
	n := newBenchNode(b)
	c := newClient[sumRequest, sumResponse](b, n, "role:math,cmd:sum")
	ctx := runtime.AppendMetadata(context.Background(), "x-request-id", "r-1", "x-user", "alice")
	req := &sumRequest{A: 1, B: 2}
	b.ReportAllocs()
	for b.Loop() {
		res, err := c.Call(ctx, req)
		if err != nil || res.R != 3 {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkActE_String: a string pattern, parsed once and cached.
func BenchmarkActE_String(b *testing.B) {
	n := newBenchNode(b)
	ctx := context.Background()
	req := &sumRequest{A: 1, B: 2}
	b.ReportAllocs()
	for b.Loop() {
		res, err := n.ActE(ctx, "role:math,cmd:sum", req)
		if err != nil || res.Value().(*sumResponse).R != 3 {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkAct_Map: a string pattern and a map message; three routed keys;
// the handler reads fields with Request.Get (BenchmarkAct_MapMsg asks for
// the merged map instead)
// (role from the pattern, cmd and v from the message; args is nested and
// does not route; it holds what JSON decoding gives, so Get returns it as
// it is, as a remote handler would read it).
func BenchmarkAct_Map(b *testing.B) {
	benchActMap(b, func(ctx context.Context, r runtime.Request) (any, error) {
		args := r.Get("args").(map[string]any)
		return int(args["a"].(float64) + args["b"].(float64)), nil
	})
}

// BenchmarkAct_MapMsg is BenchmarkAct_Map with a handler that asks for the
// whole merged message (Request.Msg builds a new map) instead of reading
// fields with Request.Get.
func BenchmarkAct_MapMsg(b *testing.B) {
	benchActMap(b, func(ctx context.Context, r runtime.Request) (any, error) {
		args := r.Msg().(map[string]any)["args"].(map[string]any)
		return int(args["a"].(float64) + args["b"].(float64)), nil
	})
}

// benchActMap calls role:math with a map message that h, which must sum
// args' a and b, serves.
func benchActMap(b *testing.B, h runtime.Handler) {
	n := newBenchNode(b)
	if err := n.Add("role:math,cmd:sum,v:1", h); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	msg := map[string]any{"cmd": "sum", "v": 1, "args": map[string]any{"a": 1.0, "b": 2.0}}
	b.ReportAllocs()
	for b.Loop() {
		res, err := n.Act(ctx, "role:math", msg)
		if err != nil || res.Value().(int) != 3 {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkActE_Mixin: a typed client whose pattern is completed by a
// field of the protobuf request (Mixin), as generated clients do for
// cmd:{action}-style methods.
func BenchmarkActE_Mixin(b *testing.B) {
	n := newBenchNode(b)
	out := wrapperspb.Int64(42)
	if err := n.Add("role:math,value:product", runtime.NewUnaryHandler(func(ctx context.Context, r *wrapperspb.StringValue) (*wrapperspb.Int64Value, error) {
		return out, nil
	})); err != nil {
		b.Fatal(err)
	}
	c := newClient[wrapperspb.StringValue, wrapperspb.Int64Value](b, n, "role:math", runtime.Mixin("value"))
	ctx := context.Background()
	req := wrapperspb.String("product")
	b.ReportAllocs()
	for b.Loop() {
		if r, err := c.Call(ctx, req); err != nil || r.GetValue() != 42 {
			b.Fatal(r, err)
		}
	}
}

// BenchmarkTypedCall_Proto is the bench harness's in-process "wizard typed
// call" row without its timing loop: a typed client of protobuf messages
// on its own node (no neighbours), a new *AddRequest per call, a handler
// that returns a new *AddResponse, handed back by reference.
func BenchmarkTypedCall_Proto(b *testing.B) {
	n := newTestNode(b)
	mustAdd(b, n, "role:bench,cmd:add", runtime.NewUnaryHandler(func(_ context.Context, r *mathv1.AddRequest) (*mathv1.AddResponse, error) {
		return &mathv1.AddResponse{Sum: r.GetA() + r.GetB()}, nil
	}))
	c := newClient[mathv1.AddRequest, mathv1.AddResponse](b, n, "role:bench,cmd:add")
	ctx := context.Background()
	b.ReportAllocs()
	defer reportCPU(b)()
	var i float64
	for b.Loop() {
		i++
		res, err := c.Call(ctx, &mathv1.AddRequest{A: 1, B: i})
		if err != nil || res.GetSum() != 1+i {
			b.Fatal(res, err)
		}
	}
}

// BenchmarkTypedCall_ProtoParallel is BenchmarkTypedCall_Proto with 8
// callers per GOMAXPROCS (16 on two cores, as the harness's second row).
func BenchmarkTypedCall_ProtoParallel(b *testing.B) {
	n := newTestNode(b)
	mustAdd(b, n, "role:bench,cmd:add", runtime.NewUnaryHandler(func(_ context.Context, r *mathv1.AddRequest) (*mathv1.AddResponse, error) {
		return &mathv1.AddResponse{Sum: r.GetA() + r.GetB()}, nil
	}))
	c := newClient[mathv1.AddRequest, mathv1.AddResponse](b, n, "role:bench,cmd:add")
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(8)
	defer reportCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		var i float64
		for pb.Next() {
			i++
			res, err := c.Call(ctx, &mathv1.AddRequest{A: 1, B: i})
			if err != nil || res.GetSum() != 1+i {
				b.Error(res, err)
				return
			}
		}
	})
}

// reportCPU, deferred at the start of a benchmark's timed part, reports
// the process's CPU time (user and system, every thread's) per op where
// getrusage tells: on a shared machine it moves less than the wall time
// does.
func reportCPU(b *testing.B) func() {
	start := cputime.Process()
	return func() {
		if end := cputime.Process(); b.N > 0 && end > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}
