package runtime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpb"
)

// sumHandler implements testpb.MathServiceHandler.
type sumHandler struct{ calls int }

func (h *sumHandler) Sum(ctx context.Context, r *testpb.SumRequest) (*testpb.SumResponse, error) {
	h.calls++
	var s float64
	for _, v := range r.GetValues() {
		s += v
	}
	return &testpb.SumResponse{Sum: s}, nil
}

// TestSpec: interceptors see a typed call's procedure and descriptors,
// and an untyped call's pattern.
func TestSpec(t *testing.T) {
	var handled, called []string
	n := newTestNode(t,
		runtime.WithHandlerInterceptors(func(next runtime.Handler) runtime.Handler {
			return func(ctx context.Context, r runtime.Request) (any, error) {
				s := r.Spec()
				handled = append(handled, s.Procedure+" "+methodInput(s))
				return next(ctx, r)
			}
		}),
		runtime.WithCallInterceptors(func(next runtime.Invoker) runtime.Invoker {
			return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
				s := c.Spec()
				called = append(called, s.Procedure+" "+methodInput(s))
				return next(ctx, c)
			}
		}))
	if err := testpb.RegisterMathServiceHandler(n, new(sumHandler)); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, n, "role:plain", func(ctx context.Context, r runtime.Request) (any, error) { return nil, nil })
	cl, err := testpb.NewMathServiceClient(n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Sum(t.Context(), &testpb.SumRequest{Values: []float64{1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Act(t.Context(), "role:plain,x:1", nil); err != nil {
		t.Fatal(err)
	}
	want := []string{testpb.MathServiceSumProcedure + " wizard.testkit.v1.SumRequest", "role:plain untyped"}
	if diff := cmp.Diff(want, handled); diff != "" {
		t.Errorf("handler interceptor (-want +got):\n%s", diff)
	}
	want[1] = "role:plain,x:1 untyped" // what the call routes by
	if diff := cmp.Diff(want, called); diff != "" {
		t.Errorf("call interceptor (-want +got):\n%s", diff)
	}
	if testpb.MathServiceSumProcedure != "wizard.testkit.v1.MathService/Sum" {
		t.Errorf("procedure constant = %q", testpb.MathServiceSumProcedure)
	}
}

func methodInput(s runtime.Spec) string {
	if s.Method == nil {
		return "untyped"
	}
	return string(s.Method.Input().FullName())
}

// TestWrongMessageTypes: every mismatch of message types is refused with
// invalid_argument naming both types, never an empty message.
func TestWrongMessageTypes(t *testing.T) {
	n := newTestNode(t)
	h := new(sumHandler)
	if err := testpb.RegisterMathServiceHandler(n, h); err != nil {
		t.Fatal(err)
	}
	// A handler that answers another type than its method's.
	mustAdd(t, n, "role:math,cmd:liar", runtime.NewUnaryHandler(func(ctx context.Context, r *testpb.SumRequest) (*wrapperspb.StringValue, error) {
		return wrapperspb.String("not a sum"), nil
	}))
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"a typed client of another request type", func() error {
			c, err := runtime.NewClient[wrapperspb.StringValue, testpb.SumResponse](n, testpb.MathServiceSumPattern)
			if err != nil {
				t.Fatal(err)
			}
			out, err := c.Call(ctx, wrapperspb.String("x"))
			if err == nil {
				t.Errorf("answered %v", out)
			}
			return err
		}, `"cmd:sum,role:math" takes wizard.testkit.v1.SumRequest, not google.protobuf.StringValue`},
		{"a typed client of another object type", func() error { // JSON would drop its fields: an empty request
			c, err := runtime.NewClient[testpb.SumResponse, testpb.SumResponse](n, testpb.MathServiceSumPattern)
			if err != nil {
				t.Fatal(err)
			}
			out, err := c.Call(ctx, &testpb.SumResponse{Sum: 5})
			if err == nil {
				t.Errorf("answered %v", out)
			}
			return err
		}, `"cmd:sum,role:math" takes wizard.testkit.v1.SumRequest, not wizard.testkit.v1.SumResponse`},
		{"decoding an answer into another object type", func() error {
			res, err := n.ActE(ctx, testpb.MathServiceSumPattern, &testpb.SumRequest{Values: []float64{2}})
			if err != nil {
				t.Fatal(err)
			}
			return res.Decode(new(testpb.SumRequest))
		}, "a wizard.testkit.v1.SumResponse cannot be decoded into a wizard.testkit.v1.SumRequest"},
		{"ActE with another type", func() error {
			_, err := n.ActE(ctx, testpb.MathServiceSumPattern, wrapperspb.Int64(3))
			return err
		}, `"cmd:sum,role:math" takes wizard.testkit.v1.SumRequest, not google.protobuf.Int64Value`},
		{"a typed client answered another type", func() error {
			c, err := runtime.NewClient[testpb.SumRequest, testpb.SumResponse](n, "role:math,cmd:liar")
			if err != nil {
				t.Fatal(err)
			}
			out, err := c.Call(ctx, &testpb.SumRequest{})
			if err == nil {
				t.Errorf("answered %v", out)
			}
			return err
		}, `"cmd:liar,role:math" answered google.protobuf.StringValue, not the wizard.testkit.v1.SumResponse the client expects`},
		{"decoding an answer into another type", func() error {
			res, err := n.ActE(ctx, testpb.MathServiceSumPattern, &testpb.SumRequest{Values: []float64{2}})
			if err != nil {
				t.Fatal(err)
			}
			return res.Decode(new(wrapperspb.DoubleValue))
		}, "a wizard.testkit.v1.SumResponse cannot be decoded into a google.protobuf.DoubleValue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if runtime.CodeOf(err) != runtime.CodeInvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want invalid_argument saying %q", err, tc.want)
			}
		})
	}
	if h.calls != 2 { // the decode cases' calls
		t.Errorf("the handler ran %d times, want 2", h.calls)
	}
	// Maps and JSON still reach a typed handler, through protojson.
	for _, msg := range []any{map[string]any{"values": []any{1, 2}}, []byte(`{"values":[1,2]}`)} {
		res, err := n.ActE(ctx, testpb.MathServiceSumPattern, msg)
		var out testpb.SumResponse
		if err != nil || res.Decode(&out) != nil || out.GetSum() != 3 {
			t.Errorf("untyped %T: %v, %v", msg, &out, err)
		}
	}
}
