package mux

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// TestArrivalClock checks that requests that came in one read of the
// stream share one clock reading, their deadlines running from it, while
// a request of a later read gets a reading of its own.
func TestArrivalClock(t *testing.T) {
	var mu sync.Mutex
	deadlines := map[uint64]time.Time{}
	h := func(ctx context.Context, req *wire.Frame) *wire.Frame {
		dl, ok := ctx.Deadline()
		if !ok {
			t.Errorf("request %d: no deadline", req.ID)
		}
		mu.Lock()
		deadlines[req.ID] = dl
		mu.Unlock()
		// Let the clock move on, so that a reading taken after this
		// handler differs from the one before it.
		for start := time.Now(); !time.Now().After(start); {
		}
		return &wire.Frame{Type: wire.TypeResponse}
	}
	r, _, _ := pipeServer(t, h, Options{})
	req := func(id uint64, d time.Duration) *wire.Frame {
		f := reqFrame(id, "x")
		f.Deadline = d
		return f
	}
	// One write over a pipe is one read on the server: 1 and 2 come
	// together, 2 buffered behind 1.
	r.sendAll(req(1, 10*time.Second), req(2, 20*time.Second))
	for range 2 {
		if _, err := r.read(); err != nil {
			t.Fatal(err)
		}
	}
	r.send(req(3, 10*time.Second))
	if _, err := r.read(); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	if got := deadlines[2].Sub(deadlines[1]); got != 10*time.Second {
		t.Errorf("requests read together: deadlines %v apart, want exactly 10s (one clock reading)", got)
	}
	if !deadlines[3].After(deadlines[1]) {
		t.Errorf("a request of a later read: deadline %v, not after the first read's %v", deadlines[3], deadlines[1])
	}
}
