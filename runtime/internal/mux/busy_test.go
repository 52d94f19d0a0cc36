package mux

import (
	"context"
	"testing"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// TestBusyConnectionServesOnWorkers: a request that finds another one
// running is not lone even when nothing more is buffered, and after it
// the next busyBackoff requests go to workers too (a connection that had
// requests come together is likely to have them again); lone requests are
// served inline again after that.
func TestBusyConnectionServesOnWorkers(t *testing.T) {
	release := make(chan struct{})
	inline := make(chan bool, 1)
	s := listen(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
		if string(req.Payload) == "hold" {
			<-release
		} else {
			inline <- onReader(ctx)
		}
		return echo(ctx, req)
	}, Options{})
	r := s.dialRaw(t)
	r.handshake()
	answer := func(id uint64) {
		t.Helper()
		for {
			f, err := r.read()
			if err != nil {
				t.Fatalf("reading the answer to %d: %v", id, err)
			}
			if f.Type == wire.TypeResponse && f.ID == id {
				return
			}
		}
	}
	call := func(id uint64) bool {
		t.Helper()
		r.send(reqFrame(id, "x"))
		on := testwait.Recv(t, inline)
		answer(id)
		return on
	}

	// Two requests in one write: the first goes to a worker, as the second
	// is buffered behind it, and holds its slot.
	r.write(append(wire.AppendFrame(nil, reqFrame(1, "hold")), wire.AppendFrame(nil, reqFrame(2, "x"))...))
	if testwait.Recv(t, inline) {
		t.Error("request 2, with request 1 running: served inline, want on a worker")
	}
	answer(2)
	if call(3) {
		t.Error("request 3, with request 1 running: served inline, want on a worker")
	}
	close(release)
	answer(1)
	if call(4) {
		t.Error("request 4, lone right after requests came together: served inline, want on a worker")
	}
	id := uint64(5)
	for ; id < 5+busyBackoff+1 && !call(id); id++ {
	}
	if id == 5+busyBackoff+1 {
		t.Errorf("no lone request of %d after the busy ones was served inline", busyBackoff+1)
	}
}
