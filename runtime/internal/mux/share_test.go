package mux

import (
	"context"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// takeN takes n requests from s and reports how many it got.
func takeN(s *Share, n int) int {
	got := 0
	for range n {
		if s.take() {
			got++
		}
	}
	return got
}

func releaseN(s *Share, n int) {
	for range n {
		s.release()
	}
}

// TestShare: a caller alone gets seven eighths of the limit. Once the
// node is full, a caller over its part is refused while another busy
// caller may take up to its own. An idle caller keeps the room it used
// for ShareLinger, and no more: a flood may take the rest; a closed one
// gives it back.
func TestShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(16) // 2 kept for callers not busy yet, 14 shared
		flood, caller := b.Share(), b.Share()
		defer flood.Close()
		if got := takeN(flood, 20); got != 14 {
			t.Errorf("a caller alone took %d of a limit of 16, want 14", got)
		}
		if !caller.take() {
			t.Fatal("a new caller was refused its first request")
		}
		if flood.take() {
			t.Error("on a full node, a caller over its half was not refused")
		}
		if got := takeN(caller, 10); got != 6 {
			t.Errorf("on a full node, a caller under its half (7) took %d more, want 6", got)
		}
		releaseN(flood, 8) // 6 left
		if got := takeN(flood, 5); got != 1 {
			t.Errorf("a caller at 6 of its 7 took %d more, want 1", got)
		}
		releaseN(caller, 7) // idle: the 7 it used are kept for it
		time.Sleep(ShareLinger - time.Millisecond)
		if flood.take() {
			t.Error("a caller idle for less than ShareLinger lost the room it used")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got := takeN(flood, 20); got != 7 {
			t.Errorf("once the other caller is idle for ShareLinger, the flood took %d more, want 7 (14 in all)", got)
		}

		// A caller that used one slot and went idle holds that one, not
		// half the node: the flood, over its new half, takes the rest.
		small := b.Share()
		if !small.take() {
			t.Fatal("a new caller was refused its first request")
		}
		small.release()
		releaseN(flood, 7)
		if got := takeN(flood, 20); got != 6 {
			t.Errorf("beside a caller idle after one call, the flood took %d more, want 6 (13 and the idle caller's 1 in all)", got)
		}
		if !small.take() {
			t.Error("an idle caller was refused the room it had used")
		}
		small.release()
		small.Close()

		caller.take()
		caller.Close()
		if got := takeN(flood, 2); got != 1 {
			t.Errorf("alone again at 13, the flood took %d more, want 1 (up to 14)", got)
		}
		releaseN(flood, 14)
		time.Sleep(ShareLinger)
		synctest.Wait()
		wantSettled(t, b, 1) // the closed caller's request
	})
}

// wantSettled fails t unless b counts no caller busy, no room promised
// and inflight requests in flight, once every caller is idle or closed.
func wantSettled(t *testing.T, b *Budget, inflight int64) {
	t.Helper()
	if n := b.busy.Load(); n != 0 {
		t.Errorf("%d callers busy once every one is idle or closed", n)
	}
	if n := b.inflight.Load(); n != inflight {
		t.Errorf("%d requests counted in flight, want %d", n, inflight)
	}
	if n := b.promised.Load(); n != 0 {
		t.Errorf("%d requests' room promised once no caller is busy", n)
	}
}

// TestShareLingerHoldsNoRoom: callers that have gone idle, still counted
// busy for ShareLinger, hold the room they used, not equal parts of the
// limit: a caller whose calls come right after a thousand others' answers
// may take all but their thousand, not a thousandth of the limit.
func TestShareLingerHoldsNoRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(4096) // 512 kept, 3584 shared
		idle := make([]*Share, 1000)
		for i := range idle {
			idle[i] = b.Share()
			if !idle[i].take() {
				t.Fatalf("caller %d refused its first request", i)
			}
			idle[i].release()
		}
		if n := b.busy.Load(); n != 1000 {
			t.Fatalf("%d callers busy, want 1000 lingering", n)
		}
		one := b.Share()
		if got := takeN(one, 4096); got != 2584 {
			t.Errorf("a caller after 1,000 idle ones took %d, want 2584 (3584 less their 1,000)", got)
		}
		// The node is full now: a lingering caller still finds its room.
		if !idle[0].take() {
			t.Error("a lingering caller was refused on a full node")
		}
		for _, s := range idle {
			s.Close()
		}
		one.Close()
		if n := b.promised.Load(); n != 0 {
			t.Errorf("%d requests' room promised once every caller is closed", n)
		}
	})
}

// TestShareLingerFromLastAnswer: a caller counts as busy for ShareLinger
// from its last answer, not from the first that armed the timer.
func TestShareLingerFromLastAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(16)
		caller := b.Share()
		defer caller.Close()
		caller.take()
		caller.release() // the timer is armed for ShareLinger from now
		time.Sleep(ShareLinger / 2)
		caller.take()
		caller.release()
		time.Sleep(ShareLinger * 3 / 4) // the timer has fired
		synctest.Wait()
		if n := b.busy.Load(); n != 1 {
			t.Errorf("%d callers busy 3/4 of ShareLinger after the last answer, want 1", n)
		}
		if n := b.promised.Load(); n != 1 {
			t.Errorf("%d requests' room promised to the idle caller, want 1", n)
		}
		time.Sleep(ShareLinger / 2)
		synctest.Wait()
		if n := b.busy.Load(); n != 0 {
			t.Errorf("%d callers busy past ShareLinger after the last answer, want 0", n)
		}
	})
}

// TestSharePromisesSettle: takes and releases from many goroutines on
// shares that close meanwhile leave nothing in flight and no room
// promised once every caller is done.
func TestSharePromisesSettle(t *testing.T) {
	b := NewBudget(64)
	var callers sync.WaitGroup
	for range 8 {
		s := b.Share()
		callers.Go(func() {
			var calls sync.WaitGroup
			for range 4 {
				calls.Go(func() {
					for range 2000 {
						if s.take() {
							s.release()
						}
					}
				})
			}
			calls.Wait()
			s.Close()
		})
	}
	callers.Wait()
	wantSettled(t, b, 0)
}

// TestShareRefuses: a request beyond its caller's share is answered at
// once with a refusal (a no-reply one is dropped), without running.
func TestShareRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		ran := make(chan uint64, 10)
		h := func(ctx context.Context, req *wire.Frame) *wire.Frame {
			ran <- req.ID
			<-release
			return &wire.Frame{Type: wire.TypeResponse}
		}
		share := NewBudget(2).Share() // 1 kept, 1 shared
		defer share.Close()
		cconn, sconn := net.Pipe()
		served := make(chan error, 1)
		go func() { served <- Serve(t.Context(), sconn, h, Options{Share: share}) }()
		r := newRaw(t, cconn)
		r.handshake()
		r.send(reqFrame(1, ""))
		if id := <-ran; id != 1 {
			t.Fatalf("ran %d", id)
		}
		noReply := reqFrame(2, "")
		noReply.Flags = wire.FlagNoReply
		r.send(noReply)
		r.send(reqFrame(3, ""))
		f, err := r.read()
		if err != nil {
			t.Fatal(err)
		}
		code, msg, err := wire.DecodeError(f.Payload)
		if f.Type != wire.TypeError || f.ID != 3 || f.Flags&wire.FlagRefused == 0 || code != codeResourceExhausted || err != nil {
			t.Errorf("answer %+v (code %d, %q, %v), want a refusal of request 3", f, code, msg, err)
		}
		close(release)
		if f, err := r.read(); err != nil || f.ID != 1 || f.Type != wire.TypeResponse {
			t.Errorf("then %+v, %v; want the answer to 1", f, err)
		}
		if len(ran) != 0 {
			t.Errorf("a refused request ran")
		}
		cconn.Close()
		<-served
	})
}
