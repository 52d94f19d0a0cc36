package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

func TestHandlerInterceptors(t *testing.T) {
	var trace []string
	ic := func(name string) runtime.HandlerInterceptor {
		return func(next runtime.Handler) runtime.Handler {
			return func(ctx context.Context, r runtime.Request) (any, error) {
				trace = append(trace, name+">")
				v, err := next(ctx, r)
				trace = append(trace, "<"+name)
				return v, err
			}
		}
	}
	n := newTestNode(t, runtime.WithHandlerInterceptors(ic("a"), ic("b")), runtime.WithHandlerInterceptors(ic("c")))
	mustAdd(t, n, "hi:1", func(ctx context.Context, r runtime.Request) (any, error) {
		trace = append(trace, "handler")
		return r.Get("x"), nil
	})
	mustAdd(t, n, "hi:1", func(ctx context.Context, r runtime.Request) (any, error) {
		trace = append(trace, "override")
		return r.Prior(ctx, r.Msg())
	}, runtime.Override())

	res, err := n.Act(t.Context(), "hi:1", map[string]any{"x": "y"})
	if err != nil || res.Value() != "y" {
		t.Fatalf("Act = %v, %v", res.Value(), err)
	}
	// The first interceptor is the outermost; the prior is wrapped too.
	want := []string{"a>", "b>", "c>", "override", "a>", "b>", "c>", "handler", "<c", "<b", "<a", "<c", "<b", "<a"}
	if diff := cmp.Diff(want, trace); diff != "" {
		t.Errorf("trace mismatch (-want +got):\n%s", diff)
	}

	t.Run("an interceptor can refuse", func(t *testing.T) {
		deny := func(next runtime.Handler) runtime.Handler {
			return func(ctx context.Context, r runtime.Request) (any, error) {
				if r.Get("token") != "ok" {
					return nil, runtime.NewError(runtime.CodeUnauthenticated, "wizard: no token")
				}
				return next(ctx, r)
			}
		}
		n := newTestNode(t, runtime.WithHandlerInterceptors(deny))
		mustAdd(t, n, "auth:1", replyMsg("in"))
		_, err := n.Act(t.Context(), "auth:1", nil)
		wantCode(t, err, runtime.CodeUnauthenticated)
		res, err := n.Act(t.Context(), "auth:1", map[string]any{"token": "ok"})
		if err != nil || res.Value() != "in" {
			t.Errorf("Act with token = %v, %v", res.Value(), err)
		}
	})
}

func TestCallInterceptors(t *testing.T) {
	type seenCall struct {
		Pattern string
		Msg     any
		NoReply bool
	}
	var (
		mu    sync.Mutex
		calls []seenCall
		trace []string
	)
	record := func(next runtime.Invoker) runtime.Invoker {
		return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
			mu.Lock()
			calls = append(calls, seenCall{c.Pattern.String(), c.Msg, c.NoReply})
			trace = append(trace, "record")
			mu.Unlock()
			return next(ctx, c)
		}
	}
	block := func(next runtime.Invoker) runtime.Invoker {
		return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
			mu.Lock()
			trace = append(trace, "block")
			mu.Unlock()
			if ctx == nil {
				return runtime.Result{}, errors.New("interceptor got a nil ctx")
			}
			if v, _ := c.Pattern.Get("cmd"); v == "blocked" {
				return runtime.Result{}, runtime.NewError(runtime.CodePermissionDenied, "wizard: blocked")
			}
			return next(ctx, c)
		}
	}
	n := newTestNode(t, runtime.WithCallInterceptors(record, block))
	var ran atomic.Int32
	done := make(chan struct{}, 1)
	mustAdd(t, n, "ci:1", func(ctx context.Context, r runtime.Request) (any, error) {
		ran.Add(1)
		select {
		case done <- struct{}{}:
		default:
		}
		return r.Msg(), nil
	})
	mustAdd(t, n, "ci:1,cmd:get", func(ctx context.Context, r runtime.Request) (any, error) {
		ran.Add(1)
		return "get:" + fmt.Sprint(r.Get("id")), nil
	})
	mustAdd(t, n, "ci:1,cmd:blocked", func(ctx context.Context, r runtime.Request) (any, error) {
		ran.Add(1)
		return "should not run", nil
	})

	reset := func() {
		mu.Lock()
		calls, trace = nil, nil
		mu.Unlock()
		ran.Store(0)
		select {
		case <-done:
		default:
		}
	}

	t.Run("Act: the pattern is every routed key, Msg the merged map", func(t *testing.T) {
		reset()
		res, err := n.Act(t.Context(), "ci:1", map[string]any{"cmd": "get", "id": 3})
		if err != nil || res.Value() != "get:3" {
			t.Fatalf("Act = %v, %v", res.Value(), err)
		}
		want := []seenCall{{Pattern: "ci:1,cmd:get,id:3", Msg: map[string]any{"ci": "1", "cmd": "get", "id": 3}}}
		if diff := cmp.Diff(want, calls); diff != "" {
			t.Errorf("calls mismatch (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"record", "block"}, trace); diff != "" {
			t.Errorf("the first interceptor must be the outermost (-want +got):\n%s", diff)
		}
	})

	t.Run("ActE: the pattern and mixins, Msg the data", func(t *testing.T) {
		reset()
		data := map[string]any{"cmd": "get", "id": 4}
		res, err := n.ActE(t.Context(), "ci:1", data, runtime.Mixin("cmd"))
		if err != nil || res.Value() != "get:4" {
			t.Fatalf("ActE = %v, %v", res.Value(), err)
		}
		want := []seenCall{{Pattern: "ci:1,cmd:get", Msg: data}}
		if diff := cmp.Diff(want, calls); diff != "" {
			t.Errorf("calls mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("Client", func(t *testing.T) {
		reset()
		req := &point{X: 1}
		res, err := newClient[point, point](t, n, "ci:1").Call(t.Context(), req)
		if err != nil || res != req {
			t.Fatalf("Call = %v, %v; want the request back", res, err)
		}
		want := []seenCall{{Pattern: "ci:1", Msg: req}}
		if diff := cmp.Diff(want, calls); diff != "" {
			t.Errorf("calls mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("Act proto: Msg is the message, Get sees the pattern", func(t *testing.T) {
		reset()
		msg := newSum(map[string]any{"cmd": "get", "n": int32(5)})
		mustAdd(t, n, "ci:1,cmd:get,n:5", func(ctx context.Context, r runtime.Request) (any, error) {
			if r.Msg() != any(msg) {
				return nil, fmt.Errorf("Msg() = %v, want the caller's message", r.Msg())
			}
			return fmt.Sprint(r.Get("ci"), r.Get("cmd"), r.Get("n")), nil
		})
		res, err := n.Act(t.Context(), "ci:1", msg)
		if err != nil || res.Value() != "1get5" {
			t.Fatalf("Act = %v, %v; want 1get5", res.Value(), err)
		}
		if len(calls) != 1 || calls[0].Pattern != "ci:1,cmd:get,n:5" || calls[0].Msg != any(msg) {
			t.Errorf("calls = %+v", calls)
		}
	})

	t.Run("short-circuit", func(t *testing.T) {
		reset()
		_, err := n.Act(t.Context(), "ci:1,cmd:blocked", nil)
		wantCode(t, err, runtime.CodePermissionDenied)
		_, err = n.ActE(t.Context(), "ci:1,cmd:blocked", nil)
		wantCode(t, err, runtime.CodePermissionDenied)
		if ran.Load() != 0 {
			t.Errorf("the handler ran %d times behind a short-circuiting interceptor", ran.Load())
		}
	})

	t.Run("Default still works", func(t *testing.T) {
		reset()
		res, err := n.Act(t.Context(), "ci:2", nil, runtime.Default("dflt"))
		if err != nil || res.Value() != "dflt" {
			t.Errorf("Act = %v, %v; want dflt", res.Value(), err)
		}
		res, err = n.ActE(t.Context(), "ci:2", nil, runtime.Default("dflt"), runtime.Mixin("x"))
		if err != nil || res.Value() != "dflt" {
			t.Errorf("ActE = %v, %v; want dflt", res.Value(), err)
		}
		_, err = n.ActE(t.Context(), "ci:2", nil)
		wantCode(t, err, runtime.CodeNotFound)
		if len(calls) != 3 {
			t.Errorf("interceptors saw %d calls, want 3", len(calls))
		}
	})

	t.Run("NoReply", func(t *testing.T) {
		reset()
		if _, err := n.ActE(t.Context(), "ci:1", nil, runtime.NoReply()); err != nil {
			t.Fatal(err)
		}
		testwait.Recv(t, done)
		if len(calls) != 1 || !calls[0].NoReply {
			t.Errorf("calls = %+v, want one with NoReply", calls)
		}
	})

	t.Run("nil ctx", func(t *testing.T) {
		reset()
		var nilCtx context.Context
		if _, err := n.Act(nilCtx, "ci:1", nil); err != nil {
			t.Errorf("Act(nil ctx): %v", err)
		}
		if _, err := n.ActE(nilCtx, "ci:1", nil); err != nil {
			t.Errorf("ActE(nil ctx): %v", err)
		}
	})
}
