package runtime_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

func TestNoReply(t *testing.T) {
	calls := []struct {
		name string
		call func(ctx context.Context, n *runtime.Node) (any, error)
	}{
		{"Act", func(ctx context.Context, n *runtime.Node) (any, error) {
			res, err := n.Act(ctx, "nr:1", map[string]any{"k": "v"}, runtime.NoReply())
			return res.Value(), err
		}},
		{"ActE", func(ctx context.Context, n *runtime.Node) (any, error) {
			res, err := n.ActE(ctx, "nr:1", map[string]any{"k": "v"}, runtime.NoReply())
			return res.Value(), err
		}},
		{"Client option", func(ctx context.Context, n *runtime.Node) (any, error) {
			res, err := newClient[map[string]any, string](t, n, "nr:1", runtime.NoReply()).Call(ctx, &map[string]any{"k": "v"})
			return res, err
		}},
		{"Client call option", func(ctx context.Context, n *runtime.Node) (any, error) {
			res, err := newClient[map[string]any, string](t, n, "nr:1").Call(ctx, &map[string]any{"k": "v"}, runtime.NoReply())
			return res, err
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			n := newTestNode(t)
			ran := make(chan any, 1)
			release := make(chan struct{})
			var handlerCtxErr atomic.Value
			mustAdd(t, n, "nr:1", func(ctx context.Context, r runtime.Request) (any, error) {
				<-release
				if err := ctx.Err(); err != nil {
					handlerCtxErr.Store(err)
				}
				var m map[string]any
				if err := r.Decode(&m); err != nil {
					return nil, err
				}
				ran <- m["k"]
				return "dropped", errors.New("dropped too")
			})
			ctx, cancel := context.WithCancel(t.Context())
			type out struct {
				v   any
				err error
			}
			returned := make(chan out, 1)
			go func() {
				v, err := c.call(ctx, n)
				returned <- out{v, err}
			}()
			// The call returns while the handler is still blocked.
			o := testwait.Recv(t, returned)
			if o.err != nil {
				t.Fatalf("NoReply call: %v", o.err)
			}
			if !isNilValue(o.v) {
				t.Errorf("NoReply result = %v, want empty", o.v)
			}
			// The caller's cancellation does not reach the detached handler.
			cancel()
			close(release)
			if got := testwait.Recv(t, ran); got != "v" {
				t.Errorf("handler saw k = %v, want v", got)
			}
			if err := handlerCtxErr.Load(); err != nil {
				t.Errorf("handler ctx was done: %v", err)
			}
		})
	}

	t.Run("no match is still an error", func(t *testing.T) {
		n := newTestNode(t)
		_, err := n.Act(t.Context(), "nr:none", nil, runtime.NoReply())
		wantCode(t, err, runtime.CodeNotFound)
	})

	t.Run("a failing handler is logged", func(t *testing.T) {
		var logs testlog.Buffer
		n, err := runtime.New(runtime.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		if err != nil {
			t.Fatal(err)
		}
		mustAdd(t, n, "nr:err", func(context.Context, runtime.Request) (any, error) { return nil, errors.New("boom") })
		mustAdd(t, n, "nr:panic", func(context.Context, runtime.Request) (any, error) { panic("kaboom") })
		for _, p := range []string{"nr:err", "nr:panic"} {
			if _, err := n.Act(t.Context(), p, nil, runtime.NoReply()); err != nil {
				t.Fatalf("Act(%q): %v", p, err)
			}
		}
		// Close waits for the no-reply handlers, so their logs are written.
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		out := logs.String()
		for _, want := range []string{"boom", "kaboom", "nr:err", "nr:panic"} {
			if !strings.Contains(out, want) {
				t.Errorf("log does not mention %q:\n%s", want, out)
			}
		}
	})
}

func isNilValue(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case *string:
		return v == nil
	}
	return false
}
