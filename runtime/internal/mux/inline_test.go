package mux

import (
	"context"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// onReader reports whether the handler of the request behind ctx runs
// inline on the reader, which still holds its role.
func onReader(ctx context.Context) bool {
	r := ctx.(*request)
	r.s.c.mu.Lock()
	defer r.s.c.mu.Unlock()
	return r.inline && r.s.inlineReq == r
}

// TestLoneRequestServedInline: a request that finds a handler slot free
// runs on the reader's goroutine, with no wake of another one, and the
// reader reads on after it.
func TestLoneRequestServedInline(t *testing.T) {
	leak.Check(t)
	inline := make(chan bool, 1)
	p := newPair(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
		inline <- onReader(ctx)
		return echo(ctx, req)
	}, Options{}, Options{})
	for i := range 5 {
		resp, err := p.client.Call(t.Context(), reqFrame(0, "x"))
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if string(resp.Payload) != "x" {
			t.Errorf("call %d: payload %q, want %q", i, resp.Payload, "x")
		}
		if !testwait.Recv(t, inline) {
			t.Errorf("call %d ran on a worker, not inline on the reader", i)
		}
	}
}

// TestSlowHandlerHandsReadingOver: a handler served inline that runs past
// handOverAfter does not hold up the connection: another goroutine reads
// on, and a fast call on the same connection is answered while the slow
// one runs. The slow call keeps its goroutine and is answered after.
func TestSlowHandlerHandsReadingOver(t *testing.T) {
	leak.Check(t)
	const slow = 3 // slow calls in a row, each handed over in turn
	started := make(chan struct{}, slow)
	release := make(chan struct{})
	s := listen(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
		if string(req.Payload) == "slow" {
			started <- struct{}{}
			<-release
		}
		return echo(ctx, req)
	}, Options{})
	cl := s.dial(t, Options{})

	slowDone := make(chan error, slow)
	for range slow {
		go func() {
			_, err := cl.Call(t.Context(), reqFrame(0, "slow"))
			slowDone <- err
		}()
		testwait.Recv(t, started) // one at a time: each is served inline first
	}
	for i := range 3 {
		// A guard, not a wait: the answer comes in microseconds.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		resp, err := cl.Call(ctx, reqFrame(0, "fast"))
		cancel()
		if err != nil {
			t.Fatalf("fast call %d: %v", i, err)
		}
		if string(resp.Payload) != "fast" {
			t.Errorf("fast call %d: payload %q", i, resp.Payload)
		}
	}
	select {
	case err := <-slowDone:
		t.Fatalf("a slow call ended before its handler was released: %v", err)
	default:
	}
	close(release)
	for range slow {
		if err := testwait.Recv(t, slowDone); err != nil {
			t.Errorf("slow call: %v", err)
		}
	}
}

// TestHandOverBound: reading waits on a slow handler served inline for
// two ticks of the watch exactly, not until the handler returns.
func TestHandOverBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPair(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
			if string(req.Payload) == "slow" {
				time.Sleep(time.Second) // work, in the bubble
			}
			return echo(ctx, req)
		}, Options{}, Options{})
		start := time.Now()
		slowDone := make(chan time.Duration, 1)
		go func() {
			if _, err := p.client.Call(t.Context(), reqFrame(0, "slow")); err != nil {
				t.Errorf("slow call: %v", err)
			}
			slowDone <- time.Since(start)
		}()
		synctest.Wait() // the slow handler runs, inline
		if _, err := p.client.Call(t.Context(), reqFrame(0, "fast")); err != nil {
			t.Fatalf("fast call: %v", err)
		}
		if d := time.Since(start); d != 2*handOverAfter {
			t.Errorf("the fast call was answered after %v, want %v", d, 2*handOverAfter)
		}
		if d := <-slowDone; d != time.Second {
			t.Errorf("the slow call was answered after %v, want 1s", d)
		}
	})
}

// TestInlineHandlerCancelledOnLoss: a connection lost while a handler
// runs inline on its reader still ends: the handler's context is
// cancelled and Serve returns, well before the request's deadline.
func TestInlineHandlerCancelledOnLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		started := make(chan struct{})
		ended := make(chan error, 1)
		p := newPair(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
			inline := onReader(ctx)
			close(started)
			<-ctx.Done()
			if !inline {
				t.Error("the handler did not run inline")
			}
			ended <- ctx.Err()
			return &wire.Frame{Type: wire.TypeResponse}
		}, Options{}, Options{})
		go p.client.Call(t.Context(), reqFrame(0, "x"))
		<-started
		start := time.Now()
		p.client.Close()
		if err := <-ended; err != context.Canceled {
			t.Errorf("handler's ctx.Err() = %v, want context.Canceled", err)
		}
		err := <-p.served
		if err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
		p.served <- err // for the cleanup
		if d := time.Since(start); d > 2*handOverAfter {
			t.Errorf("Serve returned %v after the loss, want at most %v", d, 2*handOverAfter)
		}
	})
}

// TestInlineBackoff: after a hand-over the next requests go to workers,
// and once one returns in time on the reader, lone requests are served
// inline again.
func TestInlineBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inline := make(chan bool, 1)
		p := newPair(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
			inline <- onReader(ctx)
			if string(req.Payload) == "slow" {
				time.Sleep(time.Second)
			}
			return echo(ctx, req)
		}, Options{}, Options{})
		call := func(payload string) bool {
			t.Helper()
			if _, err := p.client.Call(t.Context(), reqFrame(0, payload)); err != nil {
				t.Fatalf("call: %v", err)
			}
			return <-inline
		}
		if !call("slow") {
			t.Fatal("the first request did not run inline")
		}
		for i := range inlineBackoff {
			if call("fast") {
				t.Errorf("request %d after the hand-over ran inline, want on a worker", i)
			}
		}
		if !call("fast") {
			t.Errorf("request %d after the hand-over ran on a worker, want inline", inlineBackoff)
		}
	})
}

// TestWatchStops: the watch ticks only while requests are served inline:
// a period without one stops it, and the next request served inline
// starts it again.
func TestWatchStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s *server
		p := newPair(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
			s = ctx.(*request).s
			return echo(ctx, req)
		}, Options{}, Options{})
		watching := func() bool {
			s.c.mu.Lock()
			defer s.c.mu.Unlock()
			return s.watching
		}
		for range 2 {
			if _, err := p.client.Call(t.Context(), reqFrame(0, "x")); err != nil {
				t.Fatal(err)
			}
			if !watching() {
				t.Error("the watch does not tick after a request served inline")
			}
			time.Sleep(2 * handOverAfter) // a tick, and a period without a request
			synctest.Wait()
			if watching() {
				t.Error("the watch ticks on with no request running inline")
			}
		}
	})
}

// TestNoInlineOffNetConn: a stream that is not a net.Conn (a QUIC
// stream) serves every request on a worker.
func TestNoInlineOffNetConn(t *testing.T) {
	leak.Check(t)
	cconn, sconn := net.Pipe()
	served := make(chan error, 1)
	inline := make(chan bool, 1)
	go func() {
		served <- Serve(t.Context(), struct{ io.ReadWriteCloser }{sconn}, func(ctx context.Context, req *wire.Frame) *wire.Frame {
			inline <- onReader(ctx)
			return echo(ctx, req)
		}, Options{})
	}()
	cl, err := NewClient(cconn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := cl.Call(t.Context(), reqFrame(0, "x")); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if testwait.Recv(t, inline) {
			t.Errorf("call %d ran inline on a stream that is not a net.Conn", i)
		}
	}
	cl.Close()
	if err := testwait.Recv(t, served); err != nil {
		t.Errorf("Serve = %v", err)
	}
}
