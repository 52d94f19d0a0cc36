package mux

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// bufPool is a test's pool of request buffers (Options.Room and Done): a
// buffer given back is poisoned before the next request reads into it.
type bufPool struct {
	mu     sync.Mutex
	free   []*RequestBuf
	inUse  map[*RequestBuf]bool
	done   int
	reused int
	bad    []string
}

type pooledRoom struct {
	req Request
	buf *RequestBuf
}

func (p *bufPool) room() (*Request, *RequestBuf, any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b *RequestBuf
	if n := len(p.free); n > 0 {
		b, p.free = p.free[n-1], p.free[:n-1]
		p.reused++
	} else {
		b = new(RequestBuf)
	}
	p.inUse[b] = true
	x := &pooledRoom{buf: b}
	return &x.req, b, x
}

func (p *bufPool) release(room any) {
	x := room.(*pooledRoom)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.inUse[x.buf] {
		p.bad = append(p.bad, "Done called twice for a room")
		return
	}
	delete(p.inUse, x.buf)
	for i := range x.buf.body {
		x.buf.body[i] = 0xee
	}
	for i := range x.buf.meta {
		x.buf.meta[i] = wire.Meta{Key: "poison", Value: "poison"}
	}
	p.done++
	p.free = append(p.free, x.buf)
}

// TestRoomDoneAfterAnswer: Options.Done gets a request's room once, after
// its answer is encoded: an answer that points into the request's buffer
// (an echo) reaches the caller whole although Done poisons the buffer and
// the next request reads into it.
func TestRoomDoneAfterAnswer(t *testing.T) {
	pool := &bufPool{inUse: map[*RequestBuf]bool{}}
	echo := func(ctx context.Context, req *wire.Frame) *wire.Frame {
		return &wire.Frame{Type: wire.TypeResponse, Payload: req.Payload, Meta: req.Meta}
	}
	p := newPair(t, echo, Options{Room: pool.room, Done: pool.release}, Options{})
	const goroutines, calls = 4, 100
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				want := fmt.Sprintf("call %d.%d", g, i)
				req := reqFrame(0, want)
				req.Meta = []wire.Meta{{Key: "k", Value: want}}
				resp, err := p.client.Call(t.Context(), req)
				if err != nil {
					t.Error(err)
					return
				}
				if string(resp.Payload) != want || len(resp.Meta) != 1 || resp.Meta[0].Value != want {
					t.Errorf("%s answered %q, metadata %v", want, resp.Payload, resp.Meta)
				}
			}
		})
	}
	wg.Wait()
	p.client.Close()
	p.stop()
	p.served <- <-p.served // every handler has returned; the cleanup reads it again
	pool.mu.Lock()
	defer pool.mu.Unlock()
	for _, b := range pool.bad {
		t.Error(b)
	}
	if pool.done != goroutines*calls {
		t.Errorf("Done called %d times, want %d", pool.done, goroutines*calls)
	}
	if pool.reused == 0 {
		t.Error("no buffer given back was reused")
	}
}
