package tcp_test

import (
	"context"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
)

// TestDefaultInFlightBound: with no WithMaxInFlight, a node still bounds
// the handlers it runs at once. Under a Go memory limit of 256 MiB the
// default is a quarter of it at 64 KiB a handler, 1,024: eight callers of
// 256 calls each get 1,024 run and the rest refused unrun, not 2,048
// handlers at once.
func TestDefaultInFlightBound(t *testing.T) {
	const (
		limit   = 1024
		callers = 8
		each    = 256
	)
	old := debug.SetMemoryLimit(256 << 20)
	srv := newServer(t) // the default bound is taken as the node starts
	debug.SetMemoryLimit(old)

	release := transporttest.NewGate(t)
	var running, most atomic.Int64
	transporttest.MustAdd(t, srv, "role:hold", func(ctx context.Context, _ runtime.Request) (any, error) {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		defer running.Add(-1)
		select {
		case <-release.C():
		case <-ctx.Done():
		}
		return "ok", nil
	})
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		cl := newClient(t, "role:hold", srv.Addr())
		for range each {
			wg.Go(func() {
				if _, err := cl.ActE(t.Context(), "role:hold", nil); err != nil {
					failed.Add(1)
					if c := runtime.CodeOf(err); c != runtime.CodeResourceExhausted && c != runtime.CodeUnavailable {
						t.Errorf("a refused call: %v; want resource_exhausted (or the open breaker's unavailable)", err)
					}
				}
			})
		}
	}
	testwait.Until(t, "every call runs or is refused", func() bool { return running.Load()+failed.Load() == callers*each })
	release.Open()
	wg.Wait()
	if m := most.Load(); m > limit {
		t.Errorf("%d handlers ran at once, want at most the default %d", m, limit)
	}
	if f := failed.Load(); f < callers*each-limit {
		t.Errorf("%d calls refused, want at least %d", f, callers*each-limit)
	}
}
