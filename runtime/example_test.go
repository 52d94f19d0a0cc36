package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

func ExampleNode_Add() {
	node, _ := runtime.New()
	defer node.Close()

	_ = node.Add("role:math,cmd:sum", func(ctx context.Context, req runtime.Request) (any, error) {
		return req.Get("a").(float64) + req.Get("b").(float64), nil
	})
	// The same pattern again is an error...
	err := node.Add("cmd:sum,role:math", func(context.Context, runtime.Request) (any, error) { return nil, nil })
	fmt.Println(runtime.CodeOf(err))
	// ...unless it overrides; the old handler becomes the prior.
	_ = node.Add("role:math,cmd:sum", func(ctx context.Context, req runtime.Request) (any, error) {
		r, err := req.Prior(ctx, req.Msg())
		if err != nil {
			return nil, err
		}
		return r.(float64) * 10, nil
	}, runtime.Override())

	res, _ := node.Act(context.Background(), "role:math,cmd:sum", map[string]any{"a": 1.0, "b": 2.0})
	fmt.Println(res.Value())
	// Output:
	// already_exists
	// 30
}

func ExampleNode_Act() {
	node, _ := runtime.New()
	defer node.Close()

	_ = node.Add("role:math,cmd:sum", func(ctx context.Context, req runtime.Request) (any, error) {
		return map[string]any{"r": req.Get("a").(float64) + req.Get("b").(float64)}, nil
	})
	_ = node.Add("role:math,cmd:sum,integer:true", func(ctx context.Context, req runtime.Request) (any, error) {
		return map[string]any{"r": int(req.Get("a").(float64)) + int(req.Get("b").(float64))}, nil
	})

	ctx := context.Background()
	// Every root field routes: integer:true selects the narrower pattern.
	res, _ := node.Act(ctx, "role:math", map[string]any{"cmd": "sum", "a": 1.5, "b": 2.0})
	fmt.Println(res.Value())
	res, _ = node.Act(ctx, "role:math", map[string]any{"cmd": "sum", "integer": true, "a": 1.5, "b": 2.0})
	fmt.Println(res.Value())

	// Decode into a typed value.
	var out struct{ R float64 }
	res, _ = node.Act(ctx, "role:math,cmd:sum", []byte(`{"a": 0.5, "b": 0.25}`))
	_ = res.Decode(&out)
	fmt.Println(out.R)

	// Nothing matches: a coded error, or the Default.
	_, err := node.Act(ctx, "role:math,cmd:divide", nil)
	fmt.Println(errors.Is(err, runtime.ErrNotFound), err)
	res, _ = node.Act(ctx, "role:math,cmd:divide", nil, runtime.Default("n/a"))
	fmt.Println(res.Value())
	// Output:
	// map[r:3.5]
	// map[r:3]
	// 0.75
	// true wizard: no handler matches "cmd:divide,role:math"
	// n/a
}

type SumRequest struct{ A, B int }
type SumResponse struct{ R int }

func ExampleNode_ActE() {
	node, _ := runtime.New()
	defer node.Close()

	_ = node.Add("role:math,cmd:sum", runtime.NewUnaryHandler(func(ctx context.Context, req *SumRequest) (*SumResponse, error) {
		return &SumResponse{R: req.A + req.B}, nil
	}))
	_ = node.Add("role:math,cmd:product", runtime.NewUnaryHandler(func(ctx context.Context, req *SumRequest) (*SumResponse, error) {
		return &SumResponse{R: req.A * req.B}, nil
	}))

	ctx := context.Background()
	// Only the pattern routes; the handler receives the data as is.
	res, _ := node.ActE(ctx, "role:math,cmd:sum", &SumRequest{A: 2, B: 3})
	fmt.Println(res.Value().(*SumResponse).R)

	// Mixin lets a field of the data route too.
	res, _ = node.ActE(ctx, "role:math", map[string]any{"cmd": "product", "A": 2, "B": 3}, runtime.Mixin("cmd"))
	var out SumResponse
	_ = res.Decode(&out)
	fmt.Println(out.R)

	// A typed client holds its pattern pre-parsed: the generated-code path.
	sum, err := runtime.NewClient[SumRequest, SumResponse](node, "role:math,cmd:sum")
	if err != nil {
		panic(err)
	}
	r, _ := sum.Call(ctx, &SumRequest{A: 20, B: 22})
	fmt.Println(r.R)
	// Output:
	// 5
	// 6
	// 42
}

// Two nodes: one serves the math patterns over TCP, the other finds them in
// its peer's catalog and calls them as if they were local.
func Example_twoNodes() {
	tr, err := tcp.New() // one transport serves both nodes
	if err != nil {
		panic(err)
	}
	server, err := runtime.New(runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"))
	if err != nil {
		panic(err)
	}
	defer server.Close()
	_ = server.Add("role:math,cmd:sum", runtime.NewUnaryHandler(func(ctx context.Context, req *SumRequest) (*SumResponse, error) {
		return &SumResponse{R: req.A + req.B}, nil
	}))

	caller, err := runtime.New(runtime.WithTransport(tr), runtime.WithDiscovery(runtime.StaticPeers(server.Addr())))
	if err != nil {
		panic(err)
	}
	defer caller.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := caller.WaitFor(ctx, "role:math,cmd:sum"); err != nil {
		panic(err)
	}

	sum, err := runtime.NewClient[SumRequest, SumResponse](caller, "role:math,cmd:sum")
	if err != nil {
		panic(err)
	}
	r, err := sum.Call(ctx, &SumRequest{A: 20, B: 22})
	fmt.Println(r.R, err)
	_, err = caller.Act(ctx, "role:math,cmd:divide", nil)
	fmt.Println(runtime.CodeOf(err))
	// Output:
	// 42 <nil>
	// not_found
}
