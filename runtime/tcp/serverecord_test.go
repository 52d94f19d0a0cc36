package tcp_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A server gives a request's buffer, message and answer frame back to be
// reused once the answer is written only when nothing can hold them: the
// request of an unwrapped typed handler whose context carries no
// metadata. What a handler kept of its request (a plain one, one that
// wraps a typed one, a handler interceptor: the caller's id from Source,
// which points into the request's buffer), or a typed one of the context
// its metadata is in, reads as it did after many later requests that
// reuse what is given back.
func TestServerRecordKeptIsNotReused(t *testing.T) {
	var (
		mu      sync.Mutex
		kept    []string // the callers' ids as their handlers read them
		keptReq []runtime.Request
		reqWant []int64
		keptCtx []context.Context
		ctxWant []string
	)
	var valueOf func(runtime.Request) int64
	keep := func(r runtime.Request) {
		mu.Lock()
		kept = append(kept, r.Source().Node)
		keptReq, reqWant = append(keptReq, r), append(reqWant, valueOf(r))
		mu.Unlock()
	}
	echo := func(_ context.Context, r *wrapperspb.Int64Value) (*wrapperspb.Int64Value, error) {
		return r, nil
	}
	typed := runtime.NewUnaryHandler(echo)
	valueOf = func(r runtime.Request) int64 {
		var v wrapperspb.Int64Value
		if err := r.Decode(&v); err != nil {
			return -1
		}
		return v.GetValue()
	}

	// checkKept reads the kept requests while another request is served,
	// its message perhaps in a record given back: once its handler
	// returned, a request reads nothing (the reply took its place), never
	// another request's message.
	var bad []string
	checkKept := func() {
		mu.Lock()
		defer mu.Unlock()
		for i, r := range keptReq {
			if got := valueOf(r); got != 0 && got != reqWant[i] {
				bad = append(bad, fmt.Sprintf("a kept request of %d reads %d during a later request", reqWant[i], got))
			}
		}
	}
	fill := runtime.NewUnaryHandler(func(_ context.Context, r *wrapperspb.Int64Value) (*wrapperspb.Int64Value, error) {
		checkKept()
		return r, nil
	})
	srv := newServer(t)
	transporttest.MustAdd(t, srv, "role:fill", fill)
	transporttest.MustAdd(t, srv, "role:keep,kind:plain", func(_ context.Context, r runtime.Request) (any, error) {
		keep(r)
		return wrapperspb.Int64(valueOf(r)), nil
	})
	transporttest.MustAdd(t, srv, "role:keep,kind:wrap", func(ctx context.Context, r runtime.Request) (any, error) {
		keep(r)
		return typed(ctx, r)
	})
	transporttest.MustAdd(t, srv, "role:keep,kind:meta", runtime.NewUnaryHandler(func(ctx context.Context, r *wrapperspb.Int64Value) (*wrapperspb.Int64Value, error) {
		mu.Lock()
		keptCtx, ctxWant = append(keptCtx, ctx), append(ctxWant, fmt.Sprint("m", r.GetValue()))
		mu.Unlock()
		return r, nil
	}))
	intercepted := newServer(t, runtime.WithHandlerInterceptors(func(next runtime.Handler) runtime.Handler {
		return func(ctx context.Context, r runtime.Request) (any, error) {
			keep(r)
			return next(ctx, r)
		}
	}))
	transporttest.MustAdd(t, intercepted, "role:keep,kind:icept", typed)
	transporttest.MustAdd(t, intercepted, "at:icept,role:fill", fill)

	cl := newClient(t, "role:fill", srv.Addr(), intercepted.Addr())
	for _, p := range []string{"role:keep,kind:plain", "role:keep,kind:wrap", "role:keep,kind:meta", "role:keep,kind:icept", "at:icept,role:fill"} {
		transporttest.WaitRoutable(t, cl, p)
	}
	call := func(ctx context.Context, pattern string, v int64) {
		t.Helper()
		// Idempotent: no call id and token, so that the request's
		// metadata fits in its record's buffer.
		res, err := cl.ActE(ctx, pattern, wrapperspb.Int64(v), runtime.Idempotent())
		var out wrapperspb.Int64Value
		if err == nil {
			err = res.Decode(&out)
		}
		if err != nil || out.GetValue() != v {
			t.Fatalf("%s with %d: %d, %v", pattern, v, out.GetValue(), err)
		}
	}
	for i := range int64(20) {
		call(t.Context(), "role:keep,kind:plain", 1000+i)
		call(t.Context(), "role:keep,kind:wrap", 2000+i)
		call(runtime.AppendMetadata(t.Context(), "k", fmt.Sprint("m", 3000+i)), "role:keep,kind:meta", 3000+i)
		call(t.Context(), "role:keep,kind:icept", 4000+i)
		for j := range int64(4) { // these give their records back, and reuse them
			call(t.Context(), "role:fill", 5000+10*i+j)
			call(t.Context(), "at:icept,role:fill", 6000+10*i+j)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	if len(kept) != 140 || len(keptCtx) != 20 {
		t.Fatalf("%d requests and %d contexts kept, want 140 and 20", len(kept), len(keptCtx))
	}
	for _, b := range bad {
		t.Error(b)
	}
	for i, id := range kept {
		if id != cl.ID() {
			t.Errorf("kept caller id %d reads %q after later requests, want %q", i, id, cl.ID())
		}
	}
	for i, ctx := range keptCtx {
		if got := runtime.IncomingMetadata(ctx).Get("k"); got != ctxWant[i] {
			t.Errorf("a kept context's metadata reads %q after later requests, want %q", got, ctxWant[i])
		}
	}
}
