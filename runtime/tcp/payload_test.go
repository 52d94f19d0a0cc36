package tcp_test

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// TestLargePayloadEcho: protobuf requests and answers that the nodes
// marshal straight into their frames (a plain message) cross intact at
// every size, from empty to past the buffer pools' classes, from
// concurrent callers, each handler running once.
func TestLargePayloadEcho(t *testing.T) {
	srv := newServer(t)
	var runs atomic.Int64
	transporttest.MustAdd(t, srv, "role:echo", runtime.NewUnaryHandler(func(_ context.Context, r *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error) {
		runs.Add(1)
		return &wrapperspb.BytesValue{Value: r.GetValue()}, nil
	}))
	cl := newClient(t, "role:echo", srv.Addr())
	echo := transporttest.TypedClient[wrapperspb.BytesValue, wrapperspb.BytesValue](t, cl, "role:echo")
	sizes := []int{0, 1, 4 << 10, 64<<10 - 20, 64 << 10, 70 << 10, 1 << 20, 3 << 20}
	var wg sync.WaitGroup
	for i, size := range sizes {
		wg.Go(func() {
			p := bytes.Repeat([]byte{byte(i + 1)}, size)
			for j := range 3 {
				if size > 0 {
					p[0] = byte(j) // each call its own payload
				}
				got, err := echo.Call(t.Context(), &wrapperspb.BytesValue{Value: p})
				if err != nil {
					t.Errorf("%d bytes: %v", size, err)
					return
				}
				if !bytes.Equal(got.GetValue(), p) {
					t.Errorf("%d bytes: the echo of %d bytes differs", size, len(got.GetValue()))
				}
			}
		})
	}
	wg.Wait()
	if want := int64(3 * len(sizes)); runs.Load() != want {
		t.Errorf("%d handler runs, want %d", runs.Load(), want)
	}
}

// TestLargeAnswerOverFrameLimit: an answer left for the transport to
// marshal is measured against the frame limit like any other: over it,
// the caller gets ResourceExhausted, and the connection goes on.
func TestLargeAnswerOverFrameLimit(t *testing.T) {
	const limit = 64 << 10
	tr := func() runtime.Option {
		tr, err := tcp.New(tcp.WithMaxFrameSize(limit))
		if err != nil {
			t.Fatal(err)
		}
		return runtime.WithTransport(tr)
	}
	srv := transporttest.NewServer(t, nil, tr())
	transporttest.MustAdd(t, srv, "role:grow", runtime.NewUnaryHandler(func(_ context.Context, r *wrapperspb.Int64Value) (*wrapperspb.BytesValue, error) {
		return &wrapperspb.BytesValue{Value: make([]byte, r.GetValue())}, nil
	}))
	cl := newClientWith(t, "role:grow", []runtime.Option{tr()}, srv.Addr())
	grow := transporttest.TypedClient[wrapperspb.Int64Value, wrapperspb.BytesValue](t, cl, "role:grow")
	for _, c := range []struct {
		size int64
		ok   bool
	}{{limit / 2, true}, {2 * limit, false}, {limit / 2, true}} {
		got, err := grow.Call(t.Context(), wrapperspb.Int64(c.size))
		switch {
		case c.ok && (err != nil || len(got.GetValue()) != int(c.size)):
			t.Errorf("%d bytes: %d bytes, %v", c.size, len(got.GetValue()), err)
		case !c.ok:
			transporttest.WantCode(t, err, runtime.CodeResourceExhausted)
		}
	}
}
