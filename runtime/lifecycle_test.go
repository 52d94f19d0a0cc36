package runtime_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

func TestClose(t *testing.T) {
	checkLeaks := leak.Mark(t)
	n, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	var finished atomic.Bool
	mustAdd(t, n, "cl:block", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-release
		finished.Store(true)
		return "done", nil
	})
	mustAdd(t, n, "cl:fast", replyMsg("fast"))

	type out struct {
		v   any
		err error
	}
	callDone := make(chan out, 1)
	go func() {
		res, err := n.Act(context.Background(), "cl:block", nil)
		callDone <- out{res.Value(), err}
	}()
	testwait.Recv(t, started)

	// Shutdown gives up when its ctx expires, with the ctx's error.
	ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	if err := n.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown with an expiring ctx = %v, want context.DeadlineExceeded", err)
	}
	cctx, ccancel := context.WithCancel(t.Context())
	ccancel()
	if err := n.Shutdown(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown with a cancelled ctx = %v, want context.Canceled", err)
	}

	// The node is closed for new work.
	closed := []struct {
		name string
		call func() error
	}{
		{"Act", func() error { _, err := n.Act(t.Context(), "cl:fast", nil); return err }},
		{"Act no match", func() error { _, err := n.Act(t.Context(), "cl:none", nil); return err }},
		{"Act with Default", func() error { _, err := n.Act(t.Context(), "cl:none", nil, runtime.Default(1)); return err }},
		{"ActE", func() error { _, err := n.ActE(t.Context(), "cl:fast", nil); return err }},
		{"ActE NoReply", func() error { _, err := n.ActE(t.Context(), "cl:fast", nil, runtime.NoReply()); return err }},
		{"Client", func() error {
			_, err := newClient[point, point](t, n, "cl:fast").Call(t.Context(), &point{})
			return err
		}},
		{"Add", func() error { return n.Add("cl:new", replyMsg(1)) }},
		{"Add Override", func() error { return n.Add("cl:fast", replyMsg(1), runtime.Override()) }},
	}
	for _, c := range closed {
		t.Run(c.name+" after close", func(t *testing.T) {
			err := c.call()
			wantCode(t, err, runtime.CodeUnavailable)
			if !errors.Is(err, runtime.ErrClosed) || !errors.Is(err, runtime.ErrUnavailable) {
				t.Errorf("errors.Is(%v, ErrClosed/ErrUnavailable) = false", err)
			}
		})
	}

	// Close waits for the running handler.
	closeDone := make(chan error, 1)
	go func() { closeDone <- n.Close() }()
	close(release)
	if err := testwait.Recv(t, closeDone); err != nil {
		t.Errorf("Close: %v", err)
	}
	if !finished.Load() {
		t.Error("Close returned before the running handler finished")
	}
	if o := testwait.Recv(t, callDone); o.err != nil || o.v != "done" {
		t.Errorf("the call running during Close = %v, %v; want done", o.v, o.err)
	}

	// Close and Shutdown are idempotent, whatever the ctx.
	for i := range 3 {
		if err := n.Close(); err != nil {
			t.Errorf("Close #%d: %v", i+2, err)
		}
		if err := n.Shutdown(cctx); err != nil {
			t.Errorf("Shutdown(cancelled ctx) on a drained node: %v", err)
		}
	}
	checkLeaks()
}

func TestClose_WaitsForNoReply(t *testing.T) {
	checkLeaks := leak.Mark(t)
	n, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	const calls = 50
	var runs atomic.Int32
	gate := make(chan struct{})
	mustAdd(t, n, "nr:count", func(ctx context.Context, r runtime.Request) (any, error) {
		<-gate
		runs.Add(1)
		return nil, nil
	})
	for i := range calls {
		if _, err := n.ActE(t.Context(), "nr:count", i, runtime.NoReply()); err != nil {
			t.Fatalf("NoReply call %d: %v", i, err)
		}
	}
	closeDone := make(chan error, 1)
	go func() { closeDone <- n.Close() }()
	close(gate)
	if err := testwait.Recv(t, closeDone); err != nil {
		t.Fatal(err)
	}
	if got := runs.Load(); got != calls {
		t.Errorf("Close returned after %d of %d no-reply handlers", got, calls)
	}
	checkLeaks()
}

func TestClose_Empty(t *testing.T) {
	n, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Shutdown(t.Context()); err != nil {
		t.Errorf("Shutdown of an idle node: %v", err)
	}
	// A node whose Shutdown ctx is already done still closes cleanly when
	// nothing is running.
	m, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for i := range 20 {
		if err := m.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown #%d (cancelled ctx, idle node) = %v, want nil", i, err)
		}
	}
	var nilCtx context.Context
	if err := m.Shutdown(nilCtx); err != nil {
		t.Errorf("Shutdown(nil) = %v", err)
	}
}
