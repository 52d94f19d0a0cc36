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

// stacks returns the stack of every goroutine of the process by id.
func stacks() map[string]string {
	buf := make([]byte, 1<<22)
	all := map[string]string{}
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if rest, ok := strings.CutPrefix(g, "goroutine "); ok {
			all[strings.Fields(rest)[0]] = g
		}
	}
	return all
}

// stacksWith returns how many goroutines of the process have fn in their
// stack.
func stacksWith(fn string) int {
	n := 0
	for _, g := range stacks() {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}

// TestQuietConnection: the goroutines that served requests running at
// once are gone once the connection has been quiet for two workerQuiet
// periods (but for one that reads the connection now), and no keep-alive
// goroutine is left, keep-alive on; the next request is served.
func TestQuietConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const concurrent = 4
		who := make(chan string, concurrent)
		gate := make(chan struct{})
		p := newPair(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
			who <- goid()
			if string(req.Payload) == "wait" {
				<-gate
			}
			return &wire.Frame{Type: wire.TypeResponse}
		}, Options{KeepAlive: time.Hour}, Options{KeepAlive: time.Hour})
		call := func(payload string) {
			if _, err := p.client.Call(t.Context(), &wire.Frame{Payload: []byte(payload)}); err != nil {
				t.Error(err)
			}
		}
		var wg sync.WaitGroup
		for range concurrent {
			wg.Go(func() { call("wait") })
		}
		served := map[string]bool{}
		for range concurrent {
			served[<-who] = true
		}
		close(gate)
		wg.Wait()

		time.Sleep(2*workerQuiet + time.Millisecond)
		synctest.Wait()
		all := stacks()
		for id := range served {
			if g, ok := all[id]; ok && !strings.Contains(g, "readRequests") {
				t.Errorf("goroutine %s that served a request is still there, not reading, after the connection was quiet for %v:\n%s", id, 2*workerQuiet, g)
			}
		}
		if n := stacksWith("mux.(*conn).keepAlive"); n != 0 {
			t.Errorf("%d keep-alive goroutines, want none", n)
		}
		call("")
		<-who
	})
}
