package mux

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// goid returns the calling goroutine's id, from its stack's header line.
func goid() string {
	buf := make([]byte, 64)
	return strings.Fields(string(buf[:runtime.Stack(buf, false)]))[1]
}

// liveGoroutines returns the ids of every goroutine in the process.
func liveGoroutines() map[string]bool {
	buf := make([]byte, 1<<22)
	live := map[string]bool{}
	for _, line := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n") {
		if rest, ok := strings.CutPrefix(line, "goroutine "); ok {
			live[strings.Fields(rest)[0]] = true
		}
	}
	return live
}

// TestWorkers: concurrent requests get workers of their own, later ones
// reuse them, workers idle for two periods leave, and the server makes
// new ones when calls come again.
func TestWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const concurrent = 8
		who := make(chan string, concurrent)
		reader := make(chan string, 4*concurrent) // goroutines that served on the reader (see inline.go)
		gate := make(chan struct{})
		p := newPair(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
			if onReader(ctx) {
				reader <- goid()
			}
			who <- goid()
			if string(req.Payload) == "wait" {
				<-gate
			}
			return &wire.Frame{Type: wire.TypeResponse}
		}, Options{}, Options{})
		call := func(payload string) {
			if _, err := p.client.Call(t.Context(), &wire.Frame{Payload: []byte(payload)}); err != nil {
				t.Error(err)
			}
		}

		var wg sync.WaitGroup
		for range concurrent {
			wg.Go(func() { call("wait") })
		}
		workers := map[string]bool{}
		for range concurrent {
			workers[<-who] = true
		}
		if len(workers) != concurrent {
			t.Fatalf("%d requests running at once shared %d workers", concurrent, len(workers))
		}
		close(gate)
		wg.Wait()

		// Lone requests run on an idle worker or inline on the reader,
		// never on a new goroutine each.
		others := map[string]bool{}
		for range 2 * inlineBackoff {
			call("")
			if id := <-who; !workers[id] {
				others[id] = true
			}
		}
		if len(others) > 1 {
			t.Errorf("requests after the burst ran on %d new goroutines, want idle workers and the reader", len(others))
		}
		for len(reader) > 0 {
			delete(workers, <-reader) // the reader stays: it is no worker
		}

		time.Sleep(2*workerIdle + time.Millisecond)
		synctest.Wait()
		live := liveGoroutines()
		for id := range workers {
			if live[id] {
				t.Errorf("worker %s is still there after two idle periods", id)
			}
		}
		call("")
		if id := <-who; workers[id] {
			t.Errorf("a worker that should have left served a request")
		}
	})
}
