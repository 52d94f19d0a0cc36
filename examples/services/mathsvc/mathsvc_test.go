package mathsvc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	"github.com/wizardmesh/wizard/examples/services/mathsvc"
	"github.com/wizardmesh/wizard/runtime"
)

// newMathClient is mathv1.NewMathServiceClient, failing t on an error.
func newMathClient(t testing.TB, c runtime.Caller, opts ...runtime.CallOption) mathv1.MathServiceClient {
	t.Helper()
	cl, err := mathv1.NewMathServiceClient(c, opts...)
	if err != nil {
		t.Fatalf("NewMathServiceClient: %v", err)
	}
	return cl
}

// newClient is runtime.NewClient, failing t on an error.
func newClient[Req, Res any](t testing.TB, c runtime.Caller, pattern string, opts ...runtime.CallOption) *runtime.Client[Req, Res] {
	t.Helper()
	cl, err := runtime.NewClient[Req, Res](c, pattern, opts...)
	if err != nil {
		t.Fatalf("NewClient(%q): %v", pattern, err)
	}
	return cl
}

func newNode(t testing.TB, opts ...runtime.Option) *runtime.Node {
	t.Helper()
	n, err := runtime.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// TestRoundTrip calls every method through the generated client, the node
// and the generated handler registration.
func TestRoundTrip(t *testing.T) {
	ctx := t.Context()
	node := newNode(t)
	if err := mathsvc.Register(node); err != nil {
		t.Fatal(err)
	}
	math := newMathClient(t, node)
	tests := []struct {
		name string
		got  func() (proto.Message, error)
		want proto.Message
	}{
		{"sum", func() (proto.Message, error) {
			return math.Sum(ctx, &mathv1.SumRequest{Values: []float64{1, 2, 3.5}})
		}, &mathv1.SumResponse{Sum: 6.5}},
		{"sum of none", func() (proto.Message, error) {
			return math.Sum(ctx, &mathv1.SumRequest{})
		}, &mathv1.SumResponse{}},
		{"product", func() (proto.Message, error) {
			return math.Product(ctx, &mathv1.ProductRequest{Values: []float64{2, 3, 4}})
		}, &mathv1.ProductResponse{Product: 24}},
		{"divide", func() (proto.Message, error) {
			return math.Divide(ctx, &mathv1.DivideRequest{Dividend: 9, Divisor: 2})
		}, &mathv1.DivideResponse{Quotient: 4.5}},
		{"deprecated add", func() (proto.Message, error) {
			return math.Add(ctx, &mathv1.AddRequest{A: 1, B: 2}) //lint:ignore SA1019 the example still serves it
		}, &mathv1.AddResponse{Sum: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := tt.got()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, res, protocmp.Transform()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestHandlerErrorReachesCaller(t *testing.T) {
	node := newNode(t)
	if err := mathsvc.Register(node); err != nil {
		t.Fatal(err)
	}
	_, err := newMathClient(t, node).Divide(t.Context(), &mathv1.DivideRequest{Dividend: 1})
	if !errors.Is(err, runtime.ErrInvalidArgument) {
		t.Fatalf("Divide by zero: err %v, want invalid_argument", err)
	}
	if got, want := err.Error(), "mathsvc: division of 1 by zero"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}

// TestPatterns checks the canonical pattern constants and that the
// generated registration adds exactly them.
func TestPatterns(t *testing.T) {
	node := newNode(t)
	if err := mathsvc.Register(node); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range node.Patterns() {
		got = append(got, p.Pattern.String())
	}
	want := []string{
		mathv1.MathServiceAddPattern, // "cmd:add,role:math"
		mathv1.MathServiceCountPattern,
		mathv1.MathServiceDividePattern,
		mathv1.MathServiceEchoPattern,
		mathv1.MathServiceProductPattern,
		mathv1.MathServiceSumPattern,
		mathv1.MathServiceTotalPattern,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("patterns (-want +got):\n%s", diff)
	}
	if mathv1.MathServiceDividePattern != "cmd:div,role:math" {
		t.Errorf("MathServiceDividePattern = %q; written \"cmd: div\" in the .proto, canonical is cmd:div,role:math", mathv1.MathServiceDividePattern)
	}
	// Registering twice is refused by the node, and the error says why.
	if err := mathsvc.Register(node); !errors.Is(err, &runtime.Error{Code: runtime.CodeAlreadyExists}) {
		t.Errorf("second Register: err %v, want already_exists", err)
	}
}

// onlySum implements one method; the embedded Unimplemented handler answers
// the others.
type onlySum struct {
	mathv1.UnimplementedMathServiceHandler
}

func (onlySum) Sum(context.Context, *mathv1.SumRequest) (*mathv1.SumResponse, error) {
	return &mathv1.SumResponse{Sum: 42}, nil
}

func TestUnimplemented(t *testing.T) {
	node := newNode(t)
	if err := mathv1.RegisterMathServiceHandler(node, onlySum{}); err != nil {
		t.Fatal(err)
	}
	math := newMathClient(t, node)
	if res, err := math.Sum(t.Context(), &mathv1.SumRequest{}); err != nil || res.GetSum() != 42 {
		t.Fatalf("Sum = %v, %v", res, err)
	}
	_, err := math.Product(t.Context(), &mathv1.ProductRequest{Values: []float64{2}})
	if !errors.Is(err, runtime.ErrUnimplemented) {
		t.Fatalf("Product: err %v, want unimplemented", err)
	}
	if got, want := err.Error(), `wizard: wizard.examples.math.v1.MathService.Product (cmd:product,role:math) is not implemented`; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}

// TestDefault: with no handler for the pattern, runtime.Default answers,
// as a client option or per call.
func TestDefault(t *testing.T) {
	ctx := t.Context()
	node := newNode(t) // no math service on it
	fallback := &mathv1.SumResponse{Sum: -1}
	math := newMathClient(t, node, runtime.Default(fallback))
	if res, err := math.Sum(ctx, &mathv1.SumRequest{Values: []float64{1}}); err != nil || res != fallback {
		t.Errorf("Sum with a client Default = %v, %v; want the default", res, err)
	}
	plain := newMathClient(t, node)
	if _, err := plain.Sum(ctx, &mathv1.SumRequest{}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Sum with no handler: err %v, want not_found", err)
	}
	one := &mathv1.ProductResponse{Product: 1}
	if res, err := plain.Product(ctx, &mathv1.ProductRequest{}, runtime.Default(one)); err != nil || res != one {
		t.Errorf("Product with a call Default = %v, %v; want the default", res, err)
	}
}

// TestDynamicCaller: the generated handlers also serve callers without
// stubs, such as a gateway sending maps.
func TestDynamicCaller(t *testing.T) {
	node := newNode(t)
	if err := mathsvc.Register(node); err != nil {
		t.Fatal(err)
	}
	res, err := node.Act(t.Context(), "role:math,cmd:sum", map[string]any{"values": []any{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	var sum mathv1.SumResponse
	if err := res.Decode(&sum); err != nil || sum.GetSum() != 3 {
		t.Errorf("Act = %v, %v; want sum 3", &sum, err)
	}
}

// reusingMath answers Sum with one response message, reused, so that a
// call allocates nothing at all (not safe for concurrent use: benchmarks
// only).
type reusingMath struct {
	mathv1.UnimplementedMathServiceHandler
	res mathv1.SumResponse
}

func (m *reusingMath) Sum(_ context.Context, req *mathv1.SumRequest) (*mathv1.SumResponse, error) {
	var sum float64
	for _, v := range req.GetValues() {
		sum += v
	}
	m.res.Sum = sum
	return &m.res, nil
}

// newBenchNode is a node serving h, with neighbours so that the router is
// not trivially small (as in the runtime's BenchmarkActE_Precomputed).
func newBenchNode(tb testing.TB, h mathv1.MathServiceHandler) *runtime.Node {
	tb.Helper()
	node := newNode(tb)
	if err := mathv1.RegisterMathServiceHandler(node, h); err != nil {
		tb.Fatal(err)
	}
	for i := range 50 {
		if err := node.Add(fmt.Sprintf("role:svc%d,cmd:get", i), func(context.Context, runtime.Request) (any, error) { return nil, nil }); err != nil {
			tb.Fatal(err)
		}
	}
	return node
}

// handlers are the two Sum implementations the benchmarks run: one that
// reuses its response (a call allocates nothing) and the example service
// (a call allocates the response message, and nothing else).
var handlers = []struct {
	name string
	new  func() mathv1.MathServiceHandler
}{
	{"reused-response", func() mathv1.MathServiceHandler { return &reusingMath{} }},
	{"new-response", func() mathv1.MathServiceHandler { return &mathsvc.Service{} }},
}

// BenchmarkGeneratedClient is an in-process Sum through the generated math
// client. Compare it with BenchmarkActE_Precomputed_Proto from the same run.
func BenchmarkGeneratedClient(b *testing.B) {
	for _, h := range handlers {
		b.Run(h.name, func(b *testing.B) {
			math := newMathClient(b, newBenchNode(b, h.new()))
			ctx := context.Background()
			req := &mathv1.SumRequest{Values: []float64{1, 2}}
			b.ReportAllocs()
			for b.Loop() {
				res, err := math.Sum(ctx, req)
				if err != nil || res.GetSum() != 3 {
					b.Fatal(res, err)
				}
			}
		})
	}
}

// BenchmarkActE_Precomputed_Proto is the baseline of
// BenchmarkGeneratedClient: the same handler, called through
// runtime.NewClient directly (the runtime's BenchmarkActE_Precomputed with
// proto messages).
func BenchmarkActE_Precomputed_Proto(b *testing.B) {
	for _, h := range handlers {
		b.Run(h.name, func(b *testing.B) {
			c := newClient[mathv1.SumRequest, mathv1.SumResponse](b, newBenchNode(b, h.new()), mathv1.MathServiceSumPattern)
			ctx := context.Background()
			req := &mathv1.SumRequest{Values: []float64{1, 2}}
			b.ReportAllocs()
			for b.Loop() {
				res, err := c.Call(ctx, req)
				if err != nil || res.GetSum() != 3 {
					b.Fatal(res, err)
				}
			}
		})
	}
}

// TestNewClientErrors: the generated constructor reports a nil Caller or a
// bad option at once, naming it, instead of at every call.
func TestNewClientErrors(t *testing.T) {
	node, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	for _, tt := range []struct {
		name string
		c    runtime.Caller
		opts []runtime.CallOption
		want string
	}{
		{"nil Caller", nil, nil, "nil Caller"},
		{"nil option", node, []runtime.CallOption{nil}, "option 1 of 1 is nil"},
		{"negative timeout", node, []runtime.CallOption{runtime.Timeout(-time.Second)}, "Timeout(-1s): a timeout cannot be negative"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := mathv1.NewMathServiceClient(tt.c, tt.opts...)
			if c != nil || err == nil || !strings.Contains(err.Error(), tt.want) || runtime.CodeOf(err) != runtime.CodeInvalidArgument {
				t.Errorf("NewMathServiceClient = %v, %v; want an invalid_argument error saying %q", c, err, tt.want)
			}
		})
	}
}
