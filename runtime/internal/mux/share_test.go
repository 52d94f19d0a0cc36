package mux

import (
	"context"
	"net"
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

// TestShare: a caller alone gets seven eighths of the limit; once another
// is busy, each gets half of that, and an idle caller keeps its part for
// ShareLinger; a closed one gives it back.
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
			t.Error("a caller over its half was not refused")
		}
		releaseN(flood, 8) // 6 left
		if got := takeN(flood, 5); got != 1 {
			t.Errorf("a caller at 6 of its 7 took %d more, want 1", got)
		}
		caller.release()
		time.Sleep(ShareLinger - time.Millisecond)
		if flood.take() {
			t.Error("a caller idle for less than ShareLinger lost its part")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got := takeN(flood, 20); got != 7 {
			t.Errorf("once the other caller is idle for ShareLinger, the flood took %d more, want 7 (14 in all)", got)
		}
		caller.take()
		caller.Close()
		if got := takeN(flood, 1); got != 0 {
			t.Errorf("took %d over 14", got)
		}
		releaseN(flood, 14)
		time.Sleep(ShareLinger)
		synctest.Wait()
		if n := b.busy.Load(); n != 0 {
			t.Errorf("%d callers busy once every one is idle or closed", n)
		}
	})
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
