package mux

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// pipeServer serves h over a net.Pipe (a net.Conn: requests are served
// inline) and returns the client's end, past the handshake, and Serve's
// result. stop cancels Serve's ctx, which shuts it down gracefully.
func pipeServer(t *testing.T, h Handler, opts Options) (r *raw, served chan error, stop context.CancelFunc) {
	t.Helper()
	cconn, sconn := net.Pipe()
	ctx, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	served = make(chan error, 1)
	go func() { served <- Serve(ctx, sconn, h, opts) }()
	r = newRaw(t, cconn)
	r.handshake()
	t.Cleanup(func() {
		stop()
		cconn.Close()
		<-served
	})
	return r, served, stop
}

// sendAll writes frames to the server in one write, so that they are
// buffered together behind the first.
func (r *raw) sendAll(frames ...*wire.Frame) {
	r.t.Helper()
	var b []byte
	for _, f := range frames {
		b = wire.AppendFrame(b, f)
	}
	r.write(b)
}

// answers reads frames as they come, recording when each answer came, by
// request id, until the stream ends; it returns when it has.
func (r *raw) answers(start time.Time) <-chan map[uint64]time.Duration {
	ch := make(chan map[uint64]time.Duration, 1)
	go func() {
		at := make(map[uint64]time.Duration)
		for {
			f, err := r.read()
			if err != nil {
				ch <- at
				return
			}
			if f.Type == wire.TypeResponse || f.Type == wire.TypeError {
				at[f.ID] = time.Since(start)
			}
		}
	}()
	return ch
}

// TestBatchServedInline: requests that come together, with fast
// handlers, are all served inline by the reader, one after another, and
// all answered.
func TestBatchServedInline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var inline []bool
		r, _, _ := pipeServer(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
			inline = append(inline, onReader(ctx)) // one at a time: on the reader
			return echo(ctx, req)
		}, Options{})
		const n = 16
		frames := requests(n)
		r.sendAll(frames...)
		for range n {
			f, err := r.read()
			if err != nil {
				t.Fatal(err)
			}
			if f.Type != wire.TypeResponse {
				t.Fatalf("got a %v frame, want a response", f.Type)
			}
		}
		synctest.Wait()
		if len(inline) != n {
			t.Fatalf("%d handlers ran, want %d", len(inline), n)
		}
		for i, ok := range inline {
			if !ok {
				t.Errorf("request %d of the batch ran on a worker, want inline", i+1)
			}
		}
	})
}

// TestBatchSlowHandlerHandsOver: a slow handler among fast ones served
// inline holds the connection up for the watch's bound at most: the
// answers of the fast requests before it (held for the batch's flush)
// and after it leave by two ticks of the watch, the slow one's when its
// handler returns.
func TestBatchSlowHandlerHandsOver(t *testing.T) {
	for _, tc := range []struct {
		name string
		slow uint64 // the slow request's id
		n    int    // requests in the batch
	}{
		{"first", 1, 5},
		{"middle", 3, 5},
		{"last", 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, _, _ := pipeServer(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
					if string(req.Payload) == "slow" {
						time.Sleep(time.Second) // work, in the bubble
					}
					return echo(ctx, req)
				}, Options{})
				start := time.Now()
				got := r.answers(start)
				var frames []*wire.Frame
				for i := range tc.n {
					p := "fast"
					if uint64(i+1) == tc.slow {
						p = "slow"
					}
					frames = append(frames, reqFrame(uint64(i+1), p))
				}
				r.sendAll(frames...)
				time.Sleep(2 * time.Second)
				r.conn.Close()
				at := <-got
				for id := uint64(1); id <= uint64(tc.n); id++ {
					d, ok := at[id]
					switch {
					case id == tc.slow && d != time.Second:
						t.Errorf("slow request %d answered after %v (answered: %v), want 1s", id, d, ok)
					case id != tc.slow && (!ok || d > 2*handOverAfter):
						t.Errorf("fast request %d answered after %v (answered: %v), want at most %v", id, d, ok, 2*handOverAfter)
					}
				}
			})
		})
	}
}

// TestBatchCancelBehindInline: a cancel for a request buffered behind
// one served inline reaches it: a handler that waits on its context is
// handed over, and the reader goes on to apply the cancel within the
// watch's bound.
func TestBatchCancelBehindInline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ended := make(chan time.Duration, 1)
		var start time.Time
		r, _, _ := pipeServer(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
			if string(req.Payload) == "wait" {
				<-ctx.Done()
				if ctx.Err() != context.Canceled {
					t.Errorf("ctx.Err() = %v, want Canceled", ctx.Err())
				}
				ended <- time.Since(start)
			}
			return echo(ctx, req)
		}, Options{})
		start = time.Now()
		got := r.answers(start)
		r.sendAll(reqFrame(1, "fast"), reqFrame(2, "wait"), &wire.Frame{Type: wire.TypeCancel, ID: 2}, reqFrame(3, "fast"))
		if d := <-ended; d > 2*handOverAfter {
			t.Errorf("the cancel reached the handler after %v, want at most %v", d, 2*handOverAfter)
		}
		synctest.Wait()
		r.conn.Close()
		at := <-got
		for _, id := range []uint64{1, 3} {
			if d, ok := at[id]; !ok || d > 2*handOverAfter {
				t.Errorf("request %d answered after %v (answered: %v), want at most %v", id, d, ok, 2*handOverAfter)
			}
		}
	})
}

// TestBatchGoAway: a shutdown while a batch is served inline is exact:
// the goaway names the highest request taken, every request up to it is
// run once and answered, and none after it runs.
func TestBatchGoAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, at = 20, 5
		var ran []uint64
		var stop context.CancelFunc
		r, served, stop0 := pipeServer(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
			ran = append(ran, req.ID) // one at a time: on the reader
			if req.ID == at {
				stop()
				synctest.Wait() // Serve has sent the goaway, and waits for the handlers
			}
			return echo(ctx, req)
		}, Options{})
		stop = stop0
		frames := requests(n)
		r.sendAll(frames...)
		var answered []uint64
		var last uint64
		goaway := false
		for _, f := range r.readAll() {
			switch f.Type {
			case wire.TypeResponse:
				answered = append(answered, f.ID)
			case wire.TypeGoAway:
				goaway, last = true, f.ID
			default:
				t.Errorf("got a %v frame", f.Type)
			}
		}
		if err := <-served; err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
		served <- nil // for the cleanup
		if !goaway {
			t.Fatal("no goaway")
		}
		if last != at {
			t.Errorf("goaway names request %d, want %d", last, at)
		}
		slices.Sort(answered)
		want := []uint64{1, 2, 3, 4, 5}
		if !slices.Equal(answered, want) {
			t.Errorf("answered %v, want %v", answered, want)
		}
		if !slices.Equal(ran, want) {
			t.Errorf("ran %v, want %v", ran, want)
		}
	})
}

// TestBatchCostlyHandlersOnWorkers: once handlers served inline are
// seen to take long (above batchInlineMax, though below the hand-over
// bound), requests that come together go to workers, which serve them
// side by side, where the reader would serve them one after another.
func TestBatchCostlyHandlersOnWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		inline := map[uint64]bool{}
		r, _, _ := pipeServer(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
			on := onReader(ctx)
			mu.Lock()
			inline[req.ID] = on
			mu.Unlock()
			time.Sleep(time.Duration(batchInlineMax) * 5 / 2) // work, in the bubble
			return echo(ctx, req)
		}, Options{})
		const n = 4 * timeEvery
		frames := requests(n)
		r.roundTrips(t, frames)
		if !inline[1] {
			t.Error("the first request ran on a worker, want inline")
		}
		// (The last has nothing behind it: served inline, as a lone one.)
		for id := uint64(3*timeEvery + 1); id < n; id++ {
			if inline[id] {
				t.Errorf("request %d ran inline after handlers were seen to take %v, want on a worker", id, time.Duration(batchInlineMax)*5/2)
			}
		}
	})
}

// TestBatchOutlierStaysInline: one handler that takes long (as a fast
// one does whose thread lost its core) does not send the requests that
// follow to workers: a time counts for twice batchInlineMax at most.
func TestBatchOutlierStaysInline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var inline []bool
		r, _, _ := pipeServer(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
			inline = append(inline, onReader(ctx)) // one at a time: on the reader
			if req.ID == 1 {
				time.Sleep(handOverAfter * 9 / 10) // long, within the watch's bound
			}
			return echo(ctx, req)
		}, Options{})
		const n = 2 * timeEvery
		frames := requests(n)
		r.roundTrips(t, frames)
		synctest.Wait()
		for i, ok := range inline {
			if !ok {
				t.Errorf("request %d ran on a worker after one long handler, want inline", i+1)
			}
		}
	})
}

// requests returns n request frames with ids 1 to n.
func requests(n int) []*wire.Frame {
	frames := make([]*wire.Frame, n)
	for i := range frames {
		frames[i] = reqFrame(uint64(i+1), "x")
	}
	return frames
}

// roundTrips sends frames in one write and reads an answer for each.
func (r *raw) roundTrips(t *testing.T, frames []*wire.Frame) {
	t.Helper()
	r.sendAll(frames...)
	for range frames {
		if _, err := r.read(); err != nil {
			t.Fatal(err)
		}
	}
}
