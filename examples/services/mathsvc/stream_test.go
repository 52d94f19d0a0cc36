package mathsvc_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	"github.com/wizardmesh/wizard/examples/services/mathsvc"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// headerMath is the example service whose Echo also answers the caller's
// metadata "who": as a header, and as the trailer "echoed".
type headerMath struct{ mathsvc.Service }

func (m *headerMath) Echo(ctx context.Context, s *runtime.ServerStream[*mathv1.EchoRequest, *mathv1.EchoResponse]) error {
	who := runtime.IncomingMetadata(ctx).Get("who")
	if err := s.SendHeader("who", who); err != nil {
		return err
	}
	if err := s.SetTrailer("echoed", who); err != nil {
		return err
	}
	return m.Service.Echo(ctx, s)
}

// streamCallers are the ways the stream tests reach a node that register
// sets up: that node itself, and a node that calls it over TCP.
var streamCallers = []struct {
	name string
	new  func(t *testing.T, register func(runtime.Registrar) error) *runtime.Node
}{
	{"in-process", func(t *testing.T, register func(runtime.Registrar) error) *runtime.Node {
		node := newNode(t)
		if err := register(node); err != nil {
			t.Fatal(err)
		}
		return node
	}},
	{"tcp", func(t *testing.T, register func(runtime.Registrar) error) *runtime.Node {
		tr, err := tcp.New()
		if err != nil {
			t.Fatal(err)
		}
		server := newNode(t, runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"))
		if err := register(server); err != nil {
			t.Fatal(err)
		}
		caller := newNode(t, runtime.WithTransport(tr), runtime.WithDiscovery(runtime.StaticPeers(server.Addr())))
		for _, p := range server.Patterns() {
			if err := caller.WaitFor(t.Context(), p.Pattern.String()); err != nil {
				t.Fatal(err)
			}
		}
		return caller
	}},
}

// serving returns the register function of h.
func serving(h mathv1.MathServiceHandler) func(runtime.Registrar) error {
	return func(r runtime.Registrar) error { return mathv1.RegisterMathServiceHandler(r, h) }
}

// TestStreams streams through the generated client and the generated
// registration, each stream kind, in-process and over TCP.
func TestStreams(t *testing.T) {
	for _, c := range streamCallers {
		t.Run(c.name, func(t *testing.T) {
			math := newMathClient(t, c.new(t, serving(&headerMath{})))

			t.Run("server stream", func(t *testing.T) {
				s, err := math.Count(t.Context(), &mathv1.CountRequest{N: 5})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				var got []int64
				for {
					res, err := s.Recv()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatalf("Recv after %v: %v", got, err)
					}
					got = append(got, res.GetValue())
				}
				if diff := cmp.Diff([]int64{1, 2, 3, 4, 5}, got); diff != "" {
					t.Errorf("Count to 5 (-want +got):\n%s", diff)
				}
			})

			t.Run("server stream error", func(t *testing.T) {
				s, err := math.Count(t.Context(), &mathv1.CountRequest{N: -1})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				res, err := s.Recv()
				if !errors.Is(err, runtime.ErrInvalidArgument) {
					t.Fatalf("Recv = %v, %v; want an invalid_argument error", res, err)
				}
				if got, want := err.Error(), "mathsvc: count to -1: n cannot be negative"; got != want {
					t.Errorf("message %q, want %q", got, want)
				}
			})

			t.Run("client stream", func(t *testing.T) {
				s, err := math.Total(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				for _, v := range []float64{1, 2, 3.5} {
					if err := s.Send(&mathv1.TotalRequest{Value: v}); err != nil {
						t.Fatalf("Send(%v): %v", v, err)
					}
				}
				if err := s.CloseSend(); err != nil {
					t.Fatal(err)
				}
				res, err := s.Recv()
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(&mathv1.TotalResponse{Sum: 6.5, Count: 3}, res, protocmp.Transform()); diff != "" {
					t.Errorf("Total (-want +got):\n%s", diff)
				}
				if res, err := s.Recv(); err != io.EOF {
					t.Errorf("Recv after the answer = %v, %v; want io.EOF", res, err)
				}
			})

			t.Run("bidi stream", func(t *testing.T) {
				ctx := runtime.AppendMetadata(t.Context(), "who", "ada")
				s, err := math.Echo(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				for _, text := range []string{"one", "two", "three"} {
					if err := s.Send(&mathv1.EchoRequest{Text: text}); err != nil {
						t.Fatalf("Send(%q): %v", text, err)
					}
					res, err := s.Recv()
					if err != nil || res.GetText() != text {
						t.Fatalf("Recv after sending %q = %v, %v", text, res, err)
					}
				}
				header, err := s.Header()
				if err != nil || header.Get("who") != "ada" {
					t.Errorf("Header = %v, %v; want who: ada, the caller's metadata", header, err)
				}
				if err := s.CloseSend(); err != nil {
					t.Fatal(err)
				}
				if res, err := s.Recv(); err != io.EOF {
					t.Fatalf("Recv after CloseSend = %v, %v; want io.EOF", res, err)
				}
				if got := s.Trailer().Get("echoed"); got != "ada" {
					t.Errorf("trailer echoed: %q, want ada", got)
				}
			})
		})
	}
}

// TestStreamsUnimplemented: stream methods a handler leaves to the
// embedded Unimplemented handler end their streams with unimplemented.
func TestStreamsUnimplemented(t *testing.T) {
	for _, c := range streamCallers {
		t.Run(c.name, func(t *testing.T) {
			math := newMathClient(t, c.new(t, serving(onlySum{})))
			count, err := math.Count(t.Context(), &mathv1.CountRequest{N: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer count.Close()
			if res, err := count.Recv(); !errors.Is(err, runtime.ErrUnimplemented) {
				t.Errorf("Count: Recv = %v, %v; want unimplemented", res, err)
			}
			echo, err := math.Echo(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer echo.Close()
			if res, err := echo.Recv(); !errors.Is(err, runtime.ErrUnimplemented) {
				t.Errorf("Echo: Recv = %v, %v; want unimplemented", res, err)
			}
		})
	}
}

// TestServerStreamRequest: the generated registration of a server stream
// passes the handler the caller's one request, and ends a stream that
// closes without one with invalid_argument, naming the method.
func TestServerStreamRequest(t *testing.T) {
	for _, c := range streamCallers {
		t.Run(c.name, func(t *testing.T) {
			node := c.new(t, serving(&mathsvc.Service{}))
			s, err := node.OpenStream(t.Context(), mathv1.MathServiceCountPattern)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.CloseSend(); err != nil {
				t.Fatal(err)
			}
			res, err := s.Recv()
			if !errors.Is(err, runtime.ErrInvalidArgument) {
				t.Fatalf("Recv = %v, %v; want an invalid_argument error", res, err)
			}
			if got, want := err.Error(), "wizard: wizard.examples.math.v1.MathService.Count takes one request message; the stream closed without one"; got != want {
				t.Errorf("message %q, want %q", got, want)
			}
		})
	}
}

// TestServerStreamEndsFirst: when the handler of a server stream's pattern
// ends before it takes the request (here one added without the generated
// registration), the generated client still returns the stream, and Recv
// tells how it ended, whichever of the request and the end came first.
func TestServerStreamEndsFirst(t *testing.T) {
	refuse := func(r runtime.Registrar) error {
		return r.Add(mathv1.MathServiceCountPattern, runtime.NewStreamHandler(func(context.Context, *runtime.ServerStream[runtime.Request, any]) error {
			return runtime.Errorf(runtime.CodeFailedPrecondition, "mathsvc: not counting today")
		}))
	}
	for _, c := range streamCallers {
		t.Run(c.name, func(t *testing.T) {
			math := newMathClient(t, c.new(t, refuse))
			for range 20 {
				s, err := math.Count(t.Context(), &mathv1.CountRequest{N: 3})
				if err != nil {
					t.Fatalf("Count: %v; want the stream, its end for Recv", err)
				}
				res, err := s.Recv()
				s.Close()
				if runtime.CodeOf(err) != runtime.CodeFailedPrecondition {
					t.Fatalf("Recv = %v, %v; want the handler's failed_precondition", res, err)
				}
			}
		})
	}
}
