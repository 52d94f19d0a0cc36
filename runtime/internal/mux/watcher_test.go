package mux

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// state reports how many connections are registered with w and whether
// its goroutine runs; call it between ticks (after synctest.Wait).
func (w *Watcher) state() (registered int, ticking bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.servers), w.ticking
}

// slowOrEcho echoes a request, after a second of work in the bubble when
// its payload says "slow".
func slowOrEcho(ctx context.Context, req *wire.Frame) *wire.Frame {
	if string(req.Payload) == "slow" {
		time.Sleep(time.Second)
	}
	return echo(ctx, req)
}

// sharedPairs starts n pairs whose servers share w.
func sharedPairs(t *testing.T, n int, w *Watcher, h Handler) []*pair {
	t.Helper()
	ps := make([]*pair, n)
	for i := range ps {
		ps[i] = newPair(t, h, Options{Watch: w}, Options{})
	}
	return ps
}

// TestSharedWatchHandsOver: of connections sharing a Watcher, each whose
// handler served inline runs on is handed over within the bound, at most
// two ticks after it started, also when it started between two ticks;
// a connection whose handlers are fast is not held up meanwhile.
func TestSharedWatchHandsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWatcher()
		ps := sharedPairs(t, 3, w, slowOrEcho)
		start := time.Now()
		slowDone := make(chan error, 2)
		slow := func(p *pair) {
			go func() {
				_, err := p.client.Call(t.Context(), reqFrame(0, "slow"))
				slowDone <- err
			}()
			synctest.Wait() // its handler runs, inline
		}
		slow(ps[1])
		time.Sleep(handOverAfter / 2) // between two ticks of the watcher
		slow(ps[2])
		if n, ticking := w.state(); n != 2 || !ticking {
			t.Errorf("watcher: %d connections registered (ticking %v), want 2 (true)", n, ticking)
		}

		fast := func(p *pair) time.Duration {
			t.Helper()
			if _, err := p.client.Call(t.Context(), reqFrame(0, "fast")); err != nil {
				t.Fatalf("fast call: %v", err)
			}
			return time.Since(start)
		}
		if d := fast(ps[0]); d != handOverAfter/2 {
			t.Errorf("a fast call on a third connection was answered at %v, want %v (at once)", d, handOverAfter/2)
		}
		if d := fast(ps[1]); d != 2*handOverAfter {
			t.Errorf("the first slow connection read on at %v, want %v", d, 2*handOverAfter)
		}
		if d := fast(ps[2]); d != 2*handOverAfter {
			// 1.5 ticks after its slow handler started: the tick in between
			// saw it, the next one handed it over.
			t.Errorf("the second slow connection read on at %v, want %v", d, 2*handOverAfter)
		}
		for range 2 {
			if err := <-slowDone; err != nil {
				t.Errorf("slow call: %v", err)
			}
		}
	})
}

// TestWatcherStopsWhenIdle: a connection that served nothing inline for
// a whole period is dropped, and the watcher's goroutine ends once none
// is registered; the next request served inline starts it again.
func TestWatcherStopsWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWatcher()
		ps := sharedPairs(t, 2, w, echo)
		for round := range 2 {
			for _, p := range ps {
				if _, err := p.client.Call(t.Context(), reqFrame(0, "x")); err != nil {
					t.Fatal(err)
				}
			}
			if n, ticking := w.state(); n != 2 || !ticking {
				t.Errorf("round %d: %d connections registered (ticking %v), want 2 (true)", round, n, ticking)
			}
			time.Sleep(2 * handOverAfter) // a tick, and a period without a request
			synctest.Wait()
			if n, ticking := w.state(); n != 0 || ticking {
				t.Errorf("round %d, idle: %d connections registered (ticking %v), want 0 (false)", round, n, ticking)
			}
		}
	})
}

// TestWatcherDropsClosedConn: a connection that ends leaves its watcher
// as Serve returns, with no tick: the watcher keeps no pointer to it, and
// its timer stops at once with the last connection.
func TestWatcherDropsClosedConn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := NewWatcher()
		ps := sharedPairs(t, 2, w, echo)
		for _, p := range ps {
			if _, err := p.client.Call(t.Context(), reqFrame(0, "x")); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		for i, p := range ps {
			p.client.Close()
			err := <-p.served
			p.served <- err // for the cleanup
			synctest.Wait()
			n, ticking := w.state()
			if want := len(ps) - 1 - i; n != want || ticking != (want > 0) {
				t.Errorf("%d closed: %d connections registered (ticking %v), want %d (%v)", i+1, n, ticking, want, want > 0)
			}
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the connections left the watcher after %v, want at once", d)
		}
	})
}

// TestWatcherConcurrent: connections register with a shared watcher, are
// dropped and handed over side by side (run with -race), every call is
// answered, and once the connections are closed nothing is left
// registered and no goroutine runs.
func TestWatcherConcurrent(t *testing.T) {
	leak.Check(t)
	w := NewWatcher()
	s := listen(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
		if string(req.Payload) == "slow" {
			time.Sleep(time.Millisecond) // past the bound: handed over
		}
		return echo(ctx, req)
	}, Options{Watch: w})
	const conns, calls = 8, 100
	var wg sync.WaitGroup
	for i := range conns {
		cl := s.dial(t, Options{})
		wg.Go(func() {
			defer cl.Close()
			for j := range calls {
				payload := fmt.Sprint(i, j)
				if j%10 == 0 {
					payload = "slow"
				} else if j%7 == 0 {
					time.Sleep(2 * handOverAfter) // idle: dropped, then registered again
				}
				resp, err := cl.Call(t.Context(), reqFrame(0, payload))
				if err != nil {
					t.Errorf("conn %d call %d: %v", i, j, err)
					return
				}
				if string(resp.Payload) != payload {
					t.Errorf("conn %d call %d: payload %q, want %q", i, j, resp.Payload, payload)
				}
			}
		})
	}
	wg.Wait()
	for range conns {
		testwait.Recv(t, s.served)
	}
	if !testwait.Poll(testwait.Guard, func() bool { n, ticking := w.state(); return n == 0 && !ticking }) {
		n, ticking := w.state()
		t.Errorf("after every connection closed: %d registered (ticking %v), want 0 (false)", n, ticking)
	}
}
