package mux

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// TestNoReplyFloodKeepsConnection: callers that send no-reply requests
// faster than the server's handlers run them fill the server's bounds, so
// its reader pauses and the client's writes wait for the server to read:
// the client's ping then waits behind requests too. The server is alive
// (it reads, only slower than the callers write), so the connection must
// stay up and every request be run, however long the flood lasts against
// keep-alive's timeouts.
func TestNoReplyFloodKeepsConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const callers, each = 4, 2000 // 8,000 requests, 4 s of handling at 4 x 2 ms
		var handled atomic.Int64
		all := make(chan struct{})
		h := func(ctx context.Context, req *wire.Frame) *wire.Frame {
			time.Sleep(2 * time.Millisecond) // a slow handler, in the bubble's time
			if handled.Add(1) == callers*each+1 {
				close(all)
			}
			return nil
		}
		ka := Options{KeepAlive: 200 * time.Millisecond, KeepAliveTimeout: 200 * time.Millisecond,
			BusyKeepAlive: 100 * time.Millisecond, BusyKeepAliveTimeout: 100 * time.Millisecond}
		sopts := ka // both ends with the same keep-alive, as a node's transport has
		sopts.MaxInFlight = 4
		p := newPair(t, h, sopts, ka)
		var sent atomic.Int64
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				for range each {
					f := &wire.Frame{Type: wire.TypeRequest, Flags: wire.FlagNoReply, Pattern: "role:test", Payload: make([]byte, 64)}
					if _, err := p.client.Call(t.Context(), f); err != nil {
						t.Errorf("no-reply call %d: %v", sent.Load(), err)
						return
					}
					sent.Add(1)
				}
			})
		}
		wg.Wait()
		if err := p.client.Err(); err != nil {
			t.Fatalf("the connection failed under the flood after %d requests sent, %d run: %v", sent.Load(), handled.Load(), err)
		}
		// A call with an answer goes behind the flood, and comes back once
		// every request before it has been read.
		if _, err := p.client.Call(t.Context(), reqFrame(0, "after")); err != nil {
			t.Fatalf("call after the flood: %v (%d of %d run)", err, handled.Load(), sent.Load())
		}
		select {
		case <-all:
		case <-time.After(time.Minute): // the bubble's time: a guard
			t.Fatalf("%d requests run; want %d (%v)", handled.Load(), callers*each+1, p.client.Err())
		}
	})
}
