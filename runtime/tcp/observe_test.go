package tcp_test

import (
	"context"
	"sync"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
)

type attemptKey struct{}

// attempts is an Observer that records the attempts of remote calls.
type attempts struct {
	runtime.NopObserver
	mu      sync.Mutex
	started []runtime.Attempt
	ended   []runtime.AttemptResult
	ctxOK   []bool // AttemptEnd got the ctx AttemptStart returned
}

func (a *attempts) AttemptStart(ctx context.Context, at runtime.Attempt) context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.started = append(a.started, at)
	return context.WithValue(ctx, attemptKey{}, at.N)
}

func (a *attempts) AttemptEnd(ctx context.Context, at runtime.Attempt, r runtime.AttemptResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ended = append(a.ended, r)
	a.ctxOK = append(a.ctxOK, ctx.Value(attemptKey{}) == at.N)
}

// TestObserverAttempts: a remote call is one attempt to the server's
// target, whose end the observer learns with the answer's code and the
// ctx its start returned; a handler's error code is the attempt's code.
func TestObserverAttempts(t *testing.T) {
	srv := newServer(t)
	transporttest.MustAdd(t, srv, "role:ok", func(ctx context.Context, r runtime.Request) (any, error) { return "fine", nil })
	transporttest.MustAdd(t, srv, "role:bad", func(ctx context.Context, r runtime.Request) (any, error) {
		return nil, runtime.Errorf(runtime.CodeFailedPrecondition, "no")
	})
	obs := &attempts{}
	cl := newClientWith(t, "role:ok", []runtime.Option{runtime.WithObserver(obs)}, srv.Addr())
	transporttest.WaitRoutable(t, cl, "role:bad")
	if _, err := cl.ActE(t.Context(), "role:ok", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ActE(t.Context(), "role:bad", nil); runtime.CodeOf(err) != runtime.CodeFailedPrecondition {
		t.Fatalf("role:bad: %v", err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.started) != 2 || len(obs.ended) != 2 {
		t.Fatalf("%d attempts started, %d ended; want 2 and 2", len(obs.started), len(obs.ended))
	}
	for i, want := range []struct {
		pattern string
		code    runtime.Code
	}{{"role:ok", runtime.CodeOK}, {"role:bad", runtime.CodeFailedPrecondition}} {
		a, r := obs.started[i], obs.ended[i]
		if a.Pattern.String() != want.pattern || a.N != 1 || a.Target == nil || a.Target.Addr() != srv.Addr() {
			t.Errorf("attempt %d: %s, N %d, target %v; want %s, 1, %s", i, a.Pattern, a.N, a.Target, want.pattern, srv.Addr())
		}
		if r.Code != want.code || r.Refused || r.Err != nil || !obs.ctxOK[i] {
			t.Errorf("attempt %d ended %+v (its own ctx: %v); want code %v, not refused, no error, its ctx", i, r, obs.ctxOK[i], want.code)
		}
	}
}
