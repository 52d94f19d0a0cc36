package mux

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// stacksWith returns how many goroutines of the process have fn in their
// stack.
func stacksWith(fn string) int {
	buf := make([]byte, 1<<22)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}

// TestQuietConnection: a connection that served a request keeps its
// worker for requests that follow soon, and keeps no worker and no
// keep-alive goroutine once it has been quiet for two workerQuiet periods,
// with keep-alive on; the next request gets a new worker.
func TestQuietConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		who := make(chan string, 1)
		p := newPair(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
			who <- goid()
			return &wire.Frame{Type: wire.TypeResponse}
		}, Options{KeepAlive: time.Hour}, Options{KeepAlive: time.Hour})
		call := func() string {
			if _, err := p.client.Call(t.Context(), &wire.Frame{}); err != nil {
				t.Fatal(err)
			}
			return <-who
		}
		first := call()
		time.Sleep(workerQuiet / 2)
		if id := call(); id != first {
			t.Errorf("a request %v after the last one ran on a new goroutine %s, not on the idle worker %s", workerQuiet/2, id, first)
		}

		time.Sleep(2*workerQuiet + time.Millisecond)
		synctest.Wait()
		if liveGoroutines()[first] {
			t.Errorf("worker %s is still there after the connection was quiet for %v", first, 2*workerQuiet)
		}
		if n := stacksWith("mux.(*server).work"); n != 0 {
			t.Errorf("%d workers on a quiet connection, want none", n)
		}
		if n := stacksWith("mux.(*conn).keepAlive"); n != 0 {
			t.Errorf("%d keep-alive goroutines, want none", n)
		}
		if id := call(); id == first {
			t.Errorf("a worker that should have left served a request")
		}
	})
}
