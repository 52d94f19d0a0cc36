package runtime_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

func TestMaxInFlight(t *testing.T) {
	const limit = 3
	n := newTestNode(t, runtime.WithMaxInFlight(limit))
	started := make(chan struct{}, 100)
	release := make(chan struct{})
	var runs atomic.Int32
	mustAdd(t, n, "mif:1", func(ctx context.Context, r runtime.Request) (any, error) {
		runs.Add(1)
		started <- struct{}{}
		<-release
		return "ok", nil
	})

	var wg sync.WaitGroup
	errs := make(chan error, limit)
	for range limit {
		wg.Go(func() {
			_, err := n.Act(context.Background(), "mif:1", nil)
			errs <- err
		})
	}
	for range limit {
		testwait.Recv(t, started)
	}

	refused := []struct {
		name string
		call func() error
	}{
		{"Act", func() error { _, err := n.Act(t.Context(), "mif:1", nil); return err }},
		{"ActE", func() error { _, err := n.ActE(t.Context(), "mif:1", nil); return err }},
		{"NoReply", func() error { _, err := n.ActE(t.Context(), "mif:1", nil, runtime.NoReply()); return err }},
		{"Client", func() error {
			_, err := newClient[point, point](t, n, "mif:1").Call(t.Context(), &point{})
			return err
		}},
	}
	for _, r := range refused {
		t.Run(r.name+" refused", func(t *testing.T) {
			err := r.call()
			wantCode(t, err, runtime.CodeResourceExhausted)
			if !errors.Is(err, runtime.ErrResourceExhausted) {
				t.Errorf("errors.Is(%v, ErrResourceExhausted) = false", err)
			}
		})
	}
	if got := runs.Load(); got != limit {
		t.Errorf("handler ran %d times, want %d: a refused call ran it", got, limit)
	}

	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a call within the limit failed: %v", err)
		}
	}
	for i := range limit + 2 {
		if res, err := n.Act(t.Context(), "mif:1", nil); err != nil || res.Value() != "ok" {
			t.Errorf("call %d after release = %v, %v", i, res.Value(), err)
		}
	}
}

// TestInFlight_Panic: a handler that panics, with or without a Timeout,
// ends its call's in-flight count: the node's limit is not used up by
// panics, and Shutdown, with no grace to wait, finds nothing in flight.
func TestInFlight_Panic(t *testing.T) {
	// Not newTestNode: its Close would wait for ever for a call counted
	// and never ended.
	n, err := runtime.New(runtime.WithMaxInFlight(1))
	if err != nil {
		t.Fatal(err)
	}
	mustAdd(t, n, "mif:panic", func(context.Context, runtime.Request) (any, error) { panic("boom") })
	mustAdd(t, n, "mif:ok", func(context.Context, runtime.Request) (any, error) { return "ok", nil })
	for i := range 3 {
		_, err = n.ActE(t.Context(), "mif:panic", nil)
		wantCode(t, err, runtime.CodeInternal)
		_, err = n.ActE(t.Context(), "mif:panic", nil, runtime.Timeout(time.Minute))
		wantCode(t, err, runtime.CodeInternal)
		if _, err := n.ActE(t.Context(), "mif:ok", nil); err != nil {
			t.Fatalf("call %d after panics: %v", i, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace: what is still in flight makes Shutdown fail
	if err := n.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown after panicking calls: %v", err)
	}
}
