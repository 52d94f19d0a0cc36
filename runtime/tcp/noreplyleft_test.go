package tcp_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
)

// TestNoReplyStopsWhenCallerLeaves: no-reply calls whose caller closed
// its connection stop: the running handlers see their ctx end, and the
// calls still queued on the connection do not run. The calls carry a
// budget of a minute, so only the connection's end can stop them.
func TestNoReplyStopsWhenCallerLeaves(t *testing.T) {
	const calls = 600 // more than a connection runs at once: some queue
	srv := newServer(t)
	var started, ended atomic.Int64
	transporttest.MustAdd(t, srv, "role:work", func(ctx context.Context, _ runtime.Request) (any, error) {
		started.Add(1)
		<-ctx.Done()
		ended.Add(1)
		return nil, nil
	})
	cl := newClient(t, "role:work", srv.Addr())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for i := range calls {
		if _, err := cl.ActE(ctx, "role:work", nil, runtime.NoReply()); err != nil {
			t.Fatalf("no-reply call %d: %v", i, err)
		}
	}
	testwait.Until(t, "handlers run", func() bool { return started.Load() > 0 })
	cl.Close()
	testwait.Until(t, "every handler started ends", func() bool { return ended.Load() == started.Load() && started.Load() < calls })
	if n := started.Load(); n >= calls {
		t.Errorf("%d of %d calls ran after their caller left", n, calls)
	}
}
