package runtime_test

import (
	"context"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
)

// TestInterceptedCallAllocs: a call through a call interceptor that
// passes it on allocates one object, the intercepted Call with its own
// copy of the options; the innermost invoker routes with that copy
// rather than copying it again (a second allocation before).
func TestInterceptedCallAllocs(t *testing.T) {
	pass := func(next runtime.Invoker) runtime.Invoker { return next }
	n := newTestNode(t, runtime.WithCallInterceptors(pass))
	mustAdd(t, n, "role:echo", func(ctx context.Context, r runtime.Request) (any, error) { return nil, nil })
	ctx := context.Background()
	if _, err := n.ActE(ctx, "role:echo", nil); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = n.ActE(ctx, "role:echo", nil) }); a != 1 {
		t.Errorf("%v allocations per intercepted call, want 1", a)
	}
	// An interceptor that changes NoReply still has it honoured.
	flip := func(next runtime.Invoker) runtime.Invoker {
		return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
			c.NoReply = true
			return next(ctx, c)
		}
	}
	ran := make(chan struct{}, 1)
	m := newTestNode(t, runtime.WithCallInterceptors(flip))
	mustAdd(t, m, "role:echo", func(ctx context.Context, r runtime.Request) (any, error) {
		ran <- struct{}{}
		return "answer", nil
	})
	res, err := m.ActE(ctx, "role:echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-ran
	if res.Value() != nil {
		t.Errorf("a call made no-reply by its interceptor answered %v", res.Value())
	}
}
