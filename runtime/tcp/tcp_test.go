package tcp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// newServer starts a node serving on 127.0.0.1 with the given handlers.
func newServer(t *testing.T, opts ...runtime.Option) *runtime.Node {
	t.Helper()
	n, err := runtime.New(append([]runtime.Option{runtime.WithTransport(tcp.New()), runtime.WithListen("127.0.0.1:0")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// newClient starts a node that calls addrs, and waits until pattern is routable.
func newClient(t *testing.T, pattern string, addrs ...string) *runtime.Node {
	t.Helper()
	n, err := runtime.New(runtime.WithTransport(tcp.New()), runtime.WithDiscovery(runtime.StaticPeers(addrs...)), runtime.WithCatalogRefresh(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	waitRoutable(t, n, pattern)
	return n
}

func waitRoutable(t *testing.T, n *runtime.Node, pattern string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := n.WaitFor(ctx, pattern); err != nil {
		t.Fatalf("pattern %q never became routable: %v; have %v", pattern, err, n.Patterns())
	}
}

func TestRemoteRoundTrip(t *testing.T) {
	srv := newServer(t)
	if err := srv.Add("role:math,cmd:sum", func(ctx context.Context, r runtime.Request) (any, error) {
		return map[string]any{"r": r.Get("a").(float64) + r.Get("b").(float64)}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Add("role:math,cmd:neg", runtime.NewUnaryHandler(func(ctx context.Context, r *wrapperspb.Int64Value) (*wrapperspb.Int64Value, error) {
		return wrapperspb.Int64(-r.GetValue()), nil
	})); err != nil {
		t.Fatal(err)
	}
	if err := srv.Add("role:math,cmd:fail", func(ctx context.Context, r runtime.Request) (any, error) {
		return nil, runtime.Errorf(runtime.CodeFailedPrecondition, "no can do")
	}); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, "role:math,cmd:fail", srv.Addr())

	res, err := cl.Act(t.Context(), "role:math,cmd:sum", map[string]any{"a": 1, "b": 2})
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ R float64 }
	if err := res.Decode(&out); err != nil || out.R != 3 {
		t.Fatalf("sum = %+v, %v", out, err)
	}

	neg := runtime.NewClient[wrapperspb.Int64Value, wrapperspb.Int64Value](cl, "role:math,cmd:neg")
	r, err := neg.Call(t.Context(), wrapperspb.Int64(7))
	if err != nil || r.GetValue() != -7 {
		t.Fatalf("neg = %v, %v", r, err)
	}

	_, err = cl.Act(t.Context(), "role:math,cmd:fail", nil)
	if runtime.CodeOf(err) != runtime.CodeFailedPrecondition || err.Error() != "no can do" {
		t.Fatalf("fail: code %v, err %v", runtime.CodeOf(err), err)
	}
	_, err = cl.Act(t.Context(), "role:math,cmd:nope", nil)
	if !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("nope: %v", err)
	}
}
