package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

type addReq struct {
	A, B int
	Op   string `json:"op,omitempty"`
}

type addRes struct {
	Sum int
}

// addHandler adds A and B and records the request it received.
func addHandler(got **addReq) runtime.Handler {
	return runtime.NewUnaryHandler(func(ctx context.Context, r *addReq) (*addRes, error) {
		if got != nil {
			*got = r
		}
		if r.Op == "fail" {
			return nil, runtime.NewError(runtime.CodeFailedPrecondition, "wizard: told to fail")
		}
		if r.Op == "nil" {
			return nil, nil
		}
		return &addRes{Sum: r.A + r.B}, nil
	})
}

func TestClient_RoundTrip(t *testing.T) {
	n := newTestNode(t)
	var got *addReq
	mustAdd(t, n, "math:add", addHandler(&got))
	c := newClient[addReq, addRes](t, n, " math : add ")
	if p := c.Pattern().String(); p != "math:add" {
		t.Errorf("Pattern() = %q, want math:add", p)
	}

	req := &addReq{A: 2, B: 3}
	res, err := c.Call(t.Context(), req)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if diff := cmp.Diff(&addRes{Sum: 5}, res); diff != "" {
		t.Errorf("Call mismatch (-want +got):\n%s", diff)
	}
	if got != req {
		t.Error("the typed handler did not receive the caller's *Req as is")
	}

	// A handler returning (nil, nil) gives an empty response, as remotely.
	res, err = c.Call(t.Context(), &addReq{Op: "nil"})
	if res == nil || *res != (addRes{}) || err != nil {
		t.Errorf("Call for a nil result = %v, %v; want &{}, nil", res, err)
	}
	// Errors keep their code.
	_, err = c.Call(t.Context(), &addReq{Op: "fail"})
	wantCode(t, err, runtime.CodeFailedPrecondition)
	// A nil *Req reaches the handler as a zero Req.
	res, err = c.Call(t.Context(), nil)
	if err != nil || res == nil || res.Sum != 0 {
		t.Errorf("Call(nil) = %v, %v; want a zero sum", res, err)
	}
	if got == nil {
		t.Error("the handler received a nil *Req")
	}

	// Through Act and ActE, the typed handler's result is a *Res.
	r, err := n.ActE(t.Context(), "math:add", &addReq{A: 1, B: 1})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&addRes{Sum: 2}, r.Value()); diff != "" {
		t.Errorf("ActE Value() mismatch (-want +got):\n%s", diff)
	}
}

// TestNewUnaryHandler_Decodes checks that a typed handler receives other
// message kinds decoded into a new *Req.
func TestNewUnaryHandler_Decodes(t *testing.T) {
	tests := []struct {
		name string
		call func(ctx context.Context, n *runtime.Node) (runtime.Result, error)
		want addReq
	}{
		{"Act map", func(ctx context.Context, n *runtime.Node) (runtime.Result, error) {
			return n.Act(ctx, "math:add", map[string]any{"A": 2, "B": 5})
		}, addReq{A: 2, B: 5}},
		{"Act map[string]string", func(ctx context.Context, n *runtime.Node) (runtime.Result, error) {
			return n.Act(ctx, "math:add", map[string]string{"op": "x"})
		}, addReq{Op: "x"}},
		{"Act JSON", func(ctx context.Context, n *runtime.Node) (runtime.Result, error) {
			return n.Act(ctx, "math:add", []byte(`{"a": 4, "b": 1}`))
		}, addReq{A: 4, B: 1}},
		{"ActE JSON", func(ctx context.Context, n *runtime.Node) (runtime.Result, error) {
			return n.ActE(ctx, "math:add", []byte(`{"A": 3, "B": 3}`))
		}, addReq{A: 3, B: 3}},
		{"ActE json.RawMessage", func(ctx context.Context, n *runtime.Node) (runtime.Result, error) {
			return n.ActE(ctx, "math:add", json.RawMessage(`{"A": 1}`))
		}, addReq{A: 1}},
		{"ActE value, not pointer", func(ctx context.Context, n *runtime.Node) (runtime.Result, error) {
			return n.ActE(ctx, "math:add", addReq{A: 6, B: 1})
		}, addReq{A: 6, B: 1}},
		{"ActE nil", func(ctx context.Context, n *runtime.Node) (runtime.Result, error) {
			return n.ActE(ctx, "math:add", nil)
		}, addReq{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNode(t)
			var got *addReq
			mustAdd(t, n, "math:add", addHandler(&got))
			res, err := tt.call(t.Context(), n)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if got == nil {
				t.Fatal("the handler did not run")
			}
			if diff := cmp.Diff(tt.want, *got); diff != "" {
				t.Errorf("decoded request mismatch (-want +got):\n%s", diff)
			}
			var out addRes
			if err := res.Decode(&out); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if out.Sum != tt.want.A+tt.want.B {
				t.Errorf("Sum = %d, want %d", out.Sum, tt.want.A+tt.want.B)
			}
		})
	}

	t.Run("undecodable message", func(t *testing.T) {
		n := newTestNode(t)
		ran := false
		mustAdd(t, n, "math:add", runtime.NewUnaryHandler(func(ctx context.Context, r *addReq) (*addRes, error) {
			ran = true
			return nil, nil
		}))
		_, err := n.Act(t.Context(), "math:add", map[string]any{"A": "two"})
		wantCode(t, err, runtime.CodeInvalidArgument)
		if ran {
			t.Error("the typed function ran with an undecodable message")
		}
	})
}

func TestClient_Proto(t *testing.T) {
	n := newTestNode(t)
	echo := func(suffix string) runtime.Handler {
		return runtime.NewUnaryHandler(func(ctx context.Context, r *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
			return wrapperspb.String(r.GetValue() + suffix), nil
		})
	}
	mustAdd(t, n, "svc:echo", echo("!"))
	mustAdd(t, n, "svc:echo,value:special", echo("*"))

	plain := newClient[wrapperspb.StringValue, wrapperspb.StringValue](t, n, "svc:echo")
	mixin := newClient[wrapperspb.StringValue, wrapperspb.StringValue](t, n, "svc:echo", runtime.Mixin("value"))
	tests := []struct {
		name string
		c    *runtime.Client[wrapperspb.StringValue, wrapperspb.StringValue]
		in   string
		opts []runtime.CallOption
		want string
	}{
		{"plain", plain, "special", nil, "special!"},
		{"client mixin routes", mixin, "special", nil, "special*"},
		{"client mixin without a match", mixin, "ordinary", nil, "ordinary!"},
		{"call mixin", plain, "special", []runtime.CallOption{runtime.Mixin("value")}, "special*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := tt.c.Call(t.Context(), wrapperspb.String(tt.in), tt.opts...)
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if diff := cmp.Diff(wrapperspb.String(tt.want), res, protocmp.Transform()); diff != "" {
				t.Errorf("Call mismatch (-want +got):\n%s", diff)
			}
		})
	}

	// A handler answering with a map is decoded into the client's *Res.
	mustAdd(t, n, "svc:struct", replyMsg(map[string]any{"Sum": 9}))
	res, err := newClient[addReq, addRes](t, n, "svc:struct").Call(t.Context(), &addReq{})
	if err != nil || res == nil || res.Sum != 9 {
		t.Errorf("Call decoding a map = %v, %v; want Sum 9", res, err)
	}
	// An answer that does not decode is an error, not a panic.
	mustAdd(t, n, "svc:bad", replyMsg("not an object"))
	_, err = newClient[addReq, addRes](t, n, "svc:bad").Call(t.Context(), &addReq{})
	wantCode(t, err, runtime.CodeInvalidArgument)
}

func TestClient_Options(t *testing.T) {
	n := newTestNode(t)
	fallback := &addRes{Sum: -1}
	ran := make(chan *addReq, 1)
	mustAdd(t, n, "opt:exists", runtime.NewUnaryHandler(func(ctx context.Context, r *addReq) (*addRes, error) {
		ran <- r
		return &addRes{Sum: r.A}, nil
	}))

	c := newClient[addReq, addRes](t, n, "opt:missing", runtime.Default(fallback))
	res, err := c.Call(t.Context(), &addReq{})
	if err != nil || res != fallback {
		t.Errorf("client Default = %v, %v; want the fallback", res, err)
	}
	res, err = newClient[addReq, addRes](t, n, "opt:missing").Call(t.Context(), &addReq{}, runtime.Default(fallback))
	if err != nil || res != fallback {
		t.Errorf("call Default = %v, %v; want the fallback", res, err)
	}
	// A Default that is not a *Res is decoded.
	res, err = newClient[addReq, addRes](t, n, "opt:missing", runtime.Default(map[string]any{"Sum": 4})).Call(t.Context(), &addReq{})
	if err != nil || res == nil || res.Sum != 4 {
		t.Errorf("map Default = %v, %v; want Sum 4", res, err)
	}

	// A call option does not stick to the client.
	c = newClient[addReq, addRes](t, n, "opt:exists", runtime.Idempotent(), runtime.Timeout(0))
	if res, err := c.Call(t.Context(), &addReq{A: 1}, runtime.NoReply(), runtime.Idempotent()); res != nil || err != nil {
		t.Errorf("NoReply call = %v, %v", res, err)
	}
	testwait.Recv(t, ran)
	if res, err := c.Call(t.Context(), &addReq{A: 2}); err != nil || res == nil || res.Sum != 2 {
		t.Errorf("next call = %v, %v; want Sum 2", res, err)
	}
	<-ran
}

// fakeCaller is a Caller that is not a Node: it records what it is asked
// and forwards to a node.
type fakeCaller struct {
	node *runtime.Node

	mu       sync.Mutex
	patterns []string
	nopts    []int
	datas    []any
}

func (f *fakeCaller) ActE(ctx context.Context, pattern string, data any, opts ...runtime.CallOption) (runtime.Result, error) {
	f.mu.Lock()
	f.patterns = append(f.patterns, pattern)
	f.nopts = append(f.nopts, len(opts))
	f.datas = append(f.datas, data)
	f.mu.Unlock()
	return f.node.ActE(ctx, pattern, data, opts...)
}

var _ runtime.Caller = (*fakeCaller)(nil)

func TestClient_OtherCaller(t *testing.T) {
	n := newTestNode(t)
	ran := make(chan *addReq, 1)
	mustAdd(t, n, "fake:1", runtime.NewUnaryHandler(func(ctx context.Context, r *addReq) (*addRes, error) {
		ran <- r
		return &addRes{Sum: r.A + r.B}, nil
	}))
	mustAdd(t, n, "fake:1,op:mul", runtime.NewUnaryHandler(func(ctx context.Context, r *addReq) (*addRes, error) {
		return &addRes{Sum: r.A * r.B}, nil
	}))
	mustAdd(t, n, "fake:2,role:r,cmd:c", replyMsg(wrapperspb.String("both")))
	fallback := &addRes{Sum: -1}

	t.Run("plain", func(t *testing.T) {
		f := &fakeCaller{node: n}
		req := &addReq{A: 2, B: 3}
		res, err := newClient[addReq, addRes](t, f, "fake:1").Call(t.Context(), req)
		if err != nil || res == nil || res.Sum != 5 {
			t.Fatalf("Call = %v, %v; want Sum 5", res, err)
		}
		if got := <-ran; got != req {
			t.Error("the handler did not receive the request as is")
		}
		if diff := cmp.Diff([]string{"fake:1"}, f.patterns); diff != "" {
			t.Errorf("patterns mismatch (-want +got):\n%s", diff)
		}
		if f.datas[0] != any(req) {
			t.Errorf("the caller received %v, want the request", f.datas[0])
		}
	})

	t.Run("client options pass through", func(t *testing.T) {
		f := &fakeCaller{node: n}
		res, err := newClient[addReq, addRes](t, runtime.Caller(f), "fake:missing", runtime.Default(fallback)).Call(t.Context(), &addReq{})
		if err != nil || res != fallback {
			t.Errorf("Default through a Caller = %v, %v; want the fallback", res, err)
		}
		if len(f.nopts) != 1 || f.nopts[0] == 0 {
			t.Errorf("the Caller received %v options, want the client's", f.nopts)
		}
	})

	t.Run("call options pass through", func(t *testing.T) {
		f := &fakeCaller{node: n}
		c := newClient[addReq, addRes](t, f, "fake:1")
		res, err := c.Call(t.Context(), &addReq{A: 1}, runtime.NoReply())
		if res != nil || err != nil {
			t.Errorf("NoReply through a Caller = %v, %v", res, err)
		}
		testwait.Recv(t, ran)
		res, err = c.Call(t.Context(), &addReq{}, runtime.Default(fallback), runtime.Timeout(0))
		if err != nil || res == nil || res.Sum != 0 {
			t.Errorf("call with a Default and a match = %v, %v", res, err)
		}
		<-ran
	})

	t.Run("client and call mixins combine", func(t *testing.T) {
		f := &fakeCaller{node: n}
		c := newClient[map[string]any, addRes](t, f, "fake:1", runtime.Mixin("absent"))
		data := map[string]any{"op": "mul", "A": 3, "B": 4}
		res, err := c.Call(t.Context(), &data)
		// *map is not a message a Mixin can read.
		wantCode(t, err, runtime.CodeInvalidArgument)
		if res != nil {
			t.Errorf("res = %v alongside an error", res)
		}

		mc := newClient[dynamicpb.Message, wrapperspb.StringValue](t, f, "fake:2", runtime.Mixin("role"), runtime.Default(wrapperspb.String("default")))
		msg := newSum(map[string]any{"role": "r", "cmd": "c"})
		for _, tt := range []struct {
			opts []runtime.CallOption
			want string
		}{
			{nil, "default"},
			{[]runtime.CallOption{runtime.Mixin("cmd")}, "both"},
			{[]runtime.CallOption{runtime.Mixin("cmd"), runtime.Default(wrapperspb.String("other"))}, "both"},
		} {
			res, err := mc.Call(t.Context(), msg, tt.opts...)
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if res.GetValue() != tt.want {
				t.Errorf("Call with %d options = %q, want %q", len(tt.opts), res.GetValue(), tt.want)
			}
		}
	})

	t.Run("errors pass through", func(t *testing.T) {
		f := &fakeCaller{node: n}
		_, err := newClient[addReq, addRes](t, f, "fake:missing").Call(t.Context(), &addReq{})
		wantCode(t, err, runtime.CodeNotFound)
		var perr *pattern.ParseError
		_, err = runtime.NewClient[addReq, addRes](f, "fake:")
		if !errors.As(err, &perr) {
			t.Errorf("bad pattern through a Caller: err = %v, want a *ParseError", err)
		}
		if len(f.patterns) != 1 {
			t.Errorf("the Caller was called %d times, want 1 (a bad pattern never reaches it)", len(f.patterns))
		}
	})
}

func TestClient_BadConstruction(t *testing.T) {
	n := newTestNode(t)
	mustAdd(t, n, "x:1", addHandler(nil))

	t.Run("invalid pattern", func(t *testing.T) {
		c, err := runtime.NewClient[addReq, addRes](n, "x:1,x:2")
		var perr *pattern.ParseError
		if !errors.As(err, &perr) || c != nil {
			t.Fatalf("NewClient = %v, %v; want a *ParseError", c, err)
		}
		if perr.Pattern != "x:1,x:2" {
			t.Errorf("ParseError.Pattern = %q", perr.Pattern)
		}
	})

	t.Run("nil Caller", func(t *testing.T) {
		c, err := runtime.NewClient[addReq, addRes](nil, "x:1")
		wantCode(t, err, runtime.CodeInvalidArgument)
		if c != nil {
			t.Errorf("client = %v", c)
		}
	})

	t.Run("nil *Node", func(t *testing.T) {
		var nilNode *runtime.Node
		c, err := runtime.NewClient[addReq, addRes](nilNode, "x:1")
		wantCode(t, err, runtime.CodeInvalidArgument)
		if c != nil {
			t.Errorf("client = %v", c)
		}
	})

	for _, tt := range []struct {
		name string
		opts []runtime.CallOption
		want string
	}{
		{"nil option", []runtime.CallOption{runtime.Idempotent(), nil}, "option 2 of 2 is nil"},
		{"nil option in a bundle", []runtime.CallOption{runtime.WithCallOptions(runtime.NoReply(), nil)}, "WithCallOptions: option 2 of 2 is nil"},
		{"negative timeout", []runtime.CallOption{runtime.Timeout(-time.Second)}, "Timeout(-1s): a timeout cannot be negative"},
		{"empty mixin key", []runtime.CallOption{runtime.Mixin("a", "")}, `Mixin(["a" ""]): a key cannot be empty`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := runtime.NewClient[addReq, addRes](n, "x:1", tt.opts...)
			wantCode(t, err, runtime.CodeInvalidArgument)
			if c != nil || err == nil || !strings.Contains(err.Error(), `wizard: NewClient("x:1"): `+tt.want) {
				t.Errorf("NewClient = %v, %v; want an error saying %q", c, err, tt.want)
			}
		})
	}
}

// TestClient_OptionOrder: a client's options apply in order, bundles
// included, and a call's own options after them; mixin keys add up.
func TestClient_OptionOrder(t *testing.T) {
	n := newTestNode(t)
	deadline := make(chan time.Duration, 1)
	mustAdd(t, n, "ord:1", func(ctx context.Context, req runtime.Request) (any, error) {
		dl, _ := ctx.Deadline()
		deadline <- time.Until(dl).Round(time.Hour)
		return "plain", nil
	})
	mustAdd(t, n, "ord:1,name:x,json_name:y", func(ctx context.Context, req runtime.Request) (any, error) {
		deadline <- 0
		return "mixed", nil
	})
	tests := []struct {
		name       string
		client     []runtime.CallOption
		call       []runtime.CallOption
		want       string
		wantBudget time.Duration
	}{
		{"later wins", []runtime.CallOption{runtime.Timeout(time.Hour), runtime.Timeout(3 * time.Hour)}, nil, "plain", 3 * time.Hour},
		{"a bundle after the defaults wins", []runtime.CallOption{runtime.Timeout(time.Hour), runtime.WithCallOptions(runtime.Timeout(2 * time.Hour))}, nil, "plain", 2 * time.Hour},
		{"the call's own win", []runtime.CallOption{runtime.Timeout(time.Hour)}, []runtime.CallOption{runtime.Timeout(5 * time.Hour)}, "plain", 5 * time.Hour},
		{"mixins add up", []runtime.CallOption{runtime.Mixin("name"), runtime.WithCallOptions(runtime.Mixin("json_name"))}, nil, "mixed", 0},
		{"a call's mixin adds to the client's", []runtime.CallOption{runtime.Mixin("name")}, []runtime.CallOption{runtime.Mixin("json_name")}, "mixed", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient[descriptorpb.FieldDescriptorProto, string](t, n, "ord:1", tt.client...)
			res, err := c.Call(t.Context(), &descriptorpb.FieldDescriptorProto{Name: proto.String("x"), JsonName: proto.String("y")}, tt.call...)
			if err != nil || *res != tt.want {
				t.Fatalf("Call = %v, %v; want %q", res, err, tt.want)
			}
			if got := <-deadline; got != tt.wantBudget {
				t.Errorf("the handler's budget = %v, want %v", got, tt.wantBudget)
			}
		})
	}
}
