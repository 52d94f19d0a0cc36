package mux

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// roomed is a handler's room in a request's record (see Options.Room).
type roomed struct {
	req  Request
	buf  RequestBuf
	kept string // what the handler wrote into it
}

func newRoomed() (*Request, *RequestBuf, any) {
	x := new(roomed)
	return &x.req, &x.buf, x
}

// TestRoomIsTheRequestsOwn: with Options.Room each request's handler gets
// back, through RoomOf, the room its record was made with, the record
// being its context; a room is never given to a second request, also
// after frames the server did not take (a cancel of nothing, a ping) read
// into a record, so what a handler kept of its request and room after it
// returned stays as it left it.
func TestRoomIsTheRequestsOwn(t *testing.T) {
	type seen struct {
		ctx     context.Context
		room    *roomed
		payload []byte
	}
	got := make(chan seen, 10)
	h := func(ctx context.Context, req *wire.Frame) *wire.Frame {
		x, _ := RoomOf(ctx).(*roomed)
		if x != nil {
			x.kept = string(req.Payload)
		}
		got <- seen{ctx, x, req.Payload} // kept after the handler returns
		return &wire.Frame{Type: wire.TypeResponse, Payload: req.Payload}
	}
	opts := Options{Room: newRoomed}
	r, _, _ := pipeServer(t, h, opts)
	done := r.answers(time.Now())
	const n = 6
	for i := range n {
		// A cancel of a request that is not running and a ping are read
		// into a record the server does not take, and reuses.
		r.sendAll(&wire.Frame{Type: wire.TypeCancel, ID: 1000}, &wire.Frame{Type: wire.TypePing}, reqFrame(uint64(i+1), fmt.Sprint("call ", i)))
	}
	var all []seen
	for range n {
		select {
		case s := <-got:
			all = append(all, s)
		case <-time.After(time.Minute): // a guard only
			t.Fatal("a request was not served")
		}
	}
	rooms := map[*roomed]bool{}
	for i, s := range all {
		want := fmt.Sprint("call ", i)
		switch {
		case s.room == nil:
			t.Fatalf("request %d: RoomOf(ctx) = nil with Options.Room set", i)
		case any(&s.room.req) != any(s.ctx):
			t.Errorf("request %d: its room is not its own record's", i)
		case rooms[s.room]:
			t.Errorf("request %d: its room was another request's", i)
		case s.room.kept != want || string(s.payload) != want:
			t.Errorf("request %d: kept %q, payload %q after later requests; want %q", i, s.room.kept, s.payload, want)
		}
		rooms[s.room] = true
	}
	r.conn.Close()
	<-done
}

// TestRoomOfWithoutRoom: a server without Options.Room, or a context that
// is not a request's, gives no room.
func TestRoomOfWithoutRoom(t *testing.T) {
	if x := RoomOf(t.Context()); x != nil {
		t.Errorf("RoomOf(a context of no request) = %v, want nil", x)
	}
	got := make(chan any, 1)
	p := newPair(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
		got <- RoomOf(ctx)
		return &wire.Frame{Type: wire.TypeResponse}
	}, Options{}, Options{})
	if _, err := p.client.Call(t.Context(), reqFrame(0, "x")); err != nil {
		t.Fatal(err)
	}
	if x := <-got; x != nil {
		t.Errorf("RoomOf(ctx) = %v without Options.Room, want nil", x)
	}
}
