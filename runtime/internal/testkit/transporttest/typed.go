package transporttest

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpb"
	"github.com/wizardmesh/wizard/runtime/introspect"
)

// StringMethod is a method wizard.testkit.other.v1.Strings/Echo taking and
// answering google.protobuf.StringValue: a handler of another type than
// testpb's on the same pattern names it with runtime.Method.
var StringMethod = func() protoreflect.MethodDescriptor {
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:       proto.String("transporttest/strings.proto"),
		Package:    proto.String("wizard.testkit.other.v1"),
		Syntax:     proto.String("proto3"),
		Dependency: []string{"google/protobuf/wrappers.proto"},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Strings"),
			Method: []*descriptorpb.MethodDescriptorProto{{
				Name: proto.String("Echo"), InputType: proto.String(".google.protobuf.StringValue"), OutputType: proto.String(".google.protobuf.StringValue"),
			}},
		}},
	}, protoregistry.GlobalFiles)
	if err != nil {
		panic(err)
	}
	return fd.Services().Get(0).Methods().Get(0)
}()

// CountingTransport wraps a transport and counts the calls its
// connections send, catalog and health pulls aside.
type CountingTransport struct {
	runtime.Transport
	Calls atomic.Int64
}

// Dial dials through the wrapped transport.
func (t *CountingTransport) Dial(ctx context.Context, addr string) (runtime.Conn, error) {
	c, err := t.Transport.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return countingConn{c, &t.Calls}, nil
}

type countingConn struct {
	runtime.Conn
	n *atomic.Int64
}

func (c countingConn) Call(ctx context.Context, m *runtime.Message) (*runtime.Message, error) {
	if m.Pattern != introspect.CatalogPattern && m.Pattern != introspect.HealthPattern {
		c.n.Add(1)
	}
	return c.Conn.Call(ctx, m)
}

// sums implements testpb.MathServiceHandler, counting its calls.
type sums struct{ calls atomic.Int64 }

func (h *sums) Sum(ctx context.Context, r *testpb.SumRequest) (*testpb.SumResponse, error) {
	h.calls.Add(1)
	var s float64
	for _, v := range r.GetValues() {
		s += v
	}
	return &testpb.SumResponse{Sum: s}, nil
}

// MessageTypes checks typed calls between nodes of newTransport's: a
// caller that knows from the catalog which type a pattern takes refuses
// another before sending; a node refuses a call of another type without
// running its handler, so that the call goes to a replica that takes it;
// a replica of another type whose handler has no runtime.Method answers
// invalid_argument naming both types, never an empty message.
func MessageTypes(t *testing.T, newTransport func(t testing.TB) runtime.Transport) {
	pattern := testpb.MathServiceSumPattern
	wantCode := func(t *testing.T, err error, says string) {
		t.Helper()
		if runtime.CodeOf(err) != runtime.CodeInvalidArgument || !strings.Contains(err.Error(), says) {
			t.Errorf("err = %v, want invalid_argument saying %q", err, says)
		}
	}
	t.Run("refused before sending", func(t *testing.T) {
		srv := NewServer(t, newTransport(t))
		h := new(sums)
		if err := testpb.RegisterMathServiceHandler(srv, h); err != nil {
			t.Fatal(err)
		}
		ct := &CountingTransport{Transport: newTransport(t)}
		cl := NewClient(t, ct, pattern, nil, srv.Addr())
		c := TypedClient[wrapperspb.StringValue, testpb.SumResponse](t, cl, pattern)
		_, err := c.Call(t.Context(), wrapperspb.String("x"))
		wantCode(t, err, `"cmd:sum,role:math" takes wizard.testkit.v1.SumRequest, not google.protobuf.StringValue`)
		if n := ct.Calls.Load(); n != 0 || h.calls.Load() != 0 {
			t.Errorf("%d calls sent, the handler ran %d times; want none", n, h.calls.Load())
		}
		// The right type goes through.
		if out, err := MathClient(t, cl).Sum(t.Context(), &testpb.SumRequest{Values: []float64{1, 2}}); err != nil || out.GetSum() != 3 {
			t.Errorf("Sum = %v, %v", out, err)
		}
	})
	t.Run("refused by the node", func(t *testing.T) {
		srv := NewServer(t, newTransport(t))
		h := new(sums)
		if err := testpb.RegisterMathServiceHandler(srv, h); err != nil {
			t.Fatal(err)
		}
		conn, err := newTransport(t).Dial(t.Context(), srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		b, _ := proto.Marshal(wrapperspb.String("x"))
		reply, err := conn.Call(t.Context(), &runtime.Message{Pattern: pattern, Codec: runtime.CodecProto, Payload: b,
			Meta: []runtime.MetaPair{{Key: ":c", Value: "raw"}, {Key: ":t", Value: "google.protobuf.StringValue"}}})
		if err != nil {
			t.Fatal(err)
		}
		if reply.Code != runtime.CodeInvalidArgument || reply.Flags&runtime.FlagRefused == 0 || !strings.Contains(reply.Error, "takes wizard.testkit.v1.SumRequest, not google.protobuf.StringValue") || h.calls.Load() != 0 {
			t.Errorf("reply %v %q (flags %b), handler ran %d times; want a refusal naming both types", reply.Code, reply.Error, reply.Flags, h.calls.Load())
		}
	})
	// Two replicas of one pattern, one taking SumRequest, one StringValue.
	replicas := func(t *testing.T, typedOther bool) (*runtime.Node, *sums, *atomic.Int64) {
		a := NewServer(t, newTransport(t))
		h := new(sums)
		if err := testpb.RegisterMathServiceHandler(a, h); err != nil {
			t.Fatal(err)
		}
		b := NewServer(t, newTransport(t))
		var other atomic.Int64
		var opts []runtime.HandlerOption
		if typedOther {
			opts = append(opts, runtime.Method(StringMethod))
		}
		if err := b.Add(pattern, runtime.NewUnaryHandler(func(ctx context.Context, r *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
			other.Add(1)
			return r, nil
		}), opts...); err != nil {
			t.Fatal(err)
		}
		cl := NewClient(t, newTransport(t), pattern, nil, a.Addr(), b.Addr())
		waitTargets(t, cl, pattern, 2)
		return cl, h, &other
	}
	t.Run("a replica of another type refuses", func(t *testing.T) {
		cl, h, other := replicas(t, true)
		c := MathClient(t, cl)
		for i := range 20 {
			out, err := c.Sum(t.Context(), &testpb.SumRequest{Values: []float64{float64(i), 1}})
			if err != nil || out.GetSum() != float64(i+1) {
				t.Fatalf("call %d: %v, %v", i, out, err)
			}
		}
		if h.calls.Load() != 20 || other.Load() != 0 || cl.Stats().Retries == 0 {
			t.Errorf("SumRequest replica ran %d, StringValue replica %d, after %d refusals; want 20 and 0, after some", h.calls.Load(), other.Load(), cl.Stats().Retries)
		}
	})
	t.Run("a replica of another type without Method", func(t *testing.T) {
		cl, h, other := replicas(t, false)
		c := MathClient(t, cl)
		var failed int
		for i := 0; failed == 0 && i < 64; i++ { // the default balancer draws at random
			out, err := c.Sum(t.Context(), &testpb.SumRequest{Values: []float64{1}})
			switch {
			case err == nil && out.GetSum() == 1:
			case err != nil:
				failed++
				wantCode(t, err, `"cmd:sum,role:math" takes google.protobuf.StringValue, not wizard.testkit.v1.SumRequest`)
			default:
				t.Fatalf("call %d answered %v, nil", i, out)
			}
		}
		if failed == 0 || other.Load() != 0 {
			t.Errorf("%d calls failed, the StringValue handler ran %d times (SumRequest %d); want a failure naming both types and no run", failed, other.Load(), h.calls.Load())
		}
	})
}
