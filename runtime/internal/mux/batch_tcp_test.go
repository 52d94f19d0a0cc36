package mux

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// TestBatchOverTCP: batches served over a TCP connection, whose reader
// reads the descriptor itself and gives its buffer back before it waits
// (streambuffer.go), where the batch tests over pipes take the buffered
// path. Batches of one frame, a few, more than a buffer holds (frames
// then straddle two reads) and with bodies large enough to be read
// outside the buffer are each answered whole, every request once, with
// its own payload. A reader that counted a frame as buffered when it was
// not would hold the batch's answers and wait on the socket, for the rest
// of a frame whose first half came behind the batch: the read deadline
// turns that hang into a failure.
func TestBatchOverTCP(t *testing.T) {
	var (
		mu     sync.Mutex
		served = make(map[uint64]int)
		raw    = true // every request was read from the descriptor
	)
	s := listen(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
		r := ctx.(*request)
		mu.Lock()
		served[req.ID]++
		raw = raw && r.s.c.br.raw != nil
		mu.Unlock()
		return echo(ctx, req)
	}, Options{})
	peer := s.dialRaw(t)
	peer.handshake()

	big := bytes.Repeat([]byte("b"), 48<<10) // above a stream buffer: read into its own body
	next := uint64(0)
	for _, tc := range []struct {
		name  string
		n     int
		every int // every this many frames one has a big body (0: none)
	}{
		{"one", 1, 0},
		{"few", 3, 0},
		{"many", 1200, 0}, // ~60 KiB of frames: more than one buffer's fill
		{"mixed", 40, 7},
		{"one again", 1, 0},
	} {
		frames := make([]*wire.Frame, tc.n)
		want := make(map[uint64][]byte, tc.n)
		for i := range frames {
			next++
			p := fmt.Appendf(nil, "call %d", next)
			if tc.every > 0 && i%tc.every == tc.every-1 {
				p = append(p, big...)
			}
			frames[i] = reqFrame(next, string(p))
			want[next] = p
		}
		if err := peer.conn.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		peer.sendAll(frames...)
		for range tc.n {
			f, err := peer.read()
			if err != nil {
				t.Fatalf("%s: after %d of %d answers: %v", tc.name, tc.n-len(want), tc.n, err)
			}
			p, ok := want[f.ID]
			if !ok {
				t.Fatalf("%s: an answer to request %d, not asked in this batch or answered twice", tc.name, f.ID)
			}
			if f.Type != wire.TypeResponse || !bytes.Equal(f.Payload, p) {
				t.Fatalf("%s: request %d answered with a %v frame of %d bytes, want its own %d-byte payload back",
					tc.name, f.ID, f.Type, len(f.Payload), len(p))
			}
			delete(want, f.ID)
		}
	}

	// A batch with the first half of another frame behind it: the
	// answers leave without waiting for the rest, which this peer sends
	// only once it has them.
	frames := requests(4)
	for i, f := range frames {
		f.ID = next + uint64(i) + 1
	}
	next += 4
	tail := wire.AppendFrame(nil, reqFrame(next+1, string(big[:100])))
	next++
	var b []byte
	for _, f := range frames {
		b = wire.AppendFrame(b, f)
	}
	fresh := s.dialRaw(t) // its own connection: the big bodies above sent the first one's requests to workers
	fresh.handshake()
	if err := fresh.conn.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	fresh.write(append(b, tail[:len(tail)/2]...))
	for range frames {
		if _, err := fresh.read(); err != nil {
			t.Fatalf("a batch with half a frame behind it: %v (its answers were held for the frame's rest)", err)
		}
	}
	fresh.write(tail[len(tail)/2:])
	if f, err := fresh.read(); err != nil || f.ID != next {
		t.Fatalf("the frame sent in two halves: %v, %v", f, err)
	}

	mu.Lock()
	defer mu.Unlock()
	if !raw {
		t.Error("a request was read through a buffered reader, not the descriptor: the test does not cover what it claims")
	}
	if uint64(len(served)) != next {
		t.Errorf("%d requests served, want %d", len(served), next)
	}
	for id, n := range served {
		if n != 1 {
			t.Errorf("request %d served %d times", id, n)
		}
	}
}
