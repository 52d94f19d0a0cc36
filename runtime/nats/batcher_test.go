package nats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/natstest"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// TestBatcherBounds: the frames sent while a publish is in progress
// queue, and go in order in as few messages as the bounds allow: at most
// maxBatchFrames frames, and maxBatchBytes bytes, in each (a frame larger
// than that alone).
func TestBatcherBounds(t *testing.T) {
	b := natstest.Start(t)
	nc, err := natsgo.Connect(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("batches")
	if err != nil {
		t.Fatal(err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	w := &batcher{nc: nc, subject: "batches"}
	frame := func(id uint64, size int) *wire.Frame {
		return &wire.Frame{Type: wire.TypeResponse, ID: id, Payload: bytes.Repeat([]byte{'x'}, size)}
	}
	w.mu.Lock()
	w.busy = true // a publish in progress
	w.mu.Unlock()
	id := uint64(0)
	send := func(n, size int) {
		for range n {
			id++
			w.send(frame(id, size), 0)
		}
	}
	send(maxBatchFrames+6, 10) // one full message, six frames in the next
	send(3, maxBatchBytes/3)   // two join the six; the bytes bound puts the third in a message of its own
	send(1, maxBatchBytes+1)   // alone
	w.mu.Lock()
	w.drain(-1)
	if w.busy || len(w.queue) != 0 {
		t.Fatalf("busy %v with %d batches queued after draining", w.busy, len(w.queue))
	}
	var frames []int
	next := uint64(1)
	for next <= id {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("messages up to frame %d of %d: %v", next, id, err)
		}
		if len(m.Data) > maxBatchBytes && len(frames) != 3 {
			t.Fatalf("message %d has %d bytes", len(frames)+1, len(m.Data))
		}
		n := 0
		for data := m.Data; len(data) > 0; n++ {
			var f wire.Frame
			if data, err = nextFrame(data, 1<<20, &f); err != nil {
				t.Fatal(err)
			}
			if f.ID != next {
				t.Fatalf("frame %d where %d was next", f.ID, next)
			}
			next++
		}
		frames = append(frames, n)
	}
	if want := []int{maxBatchFrames, 6 + 2, 1, 1}; !equal(frames, want) {
		t.Fatalf("frames per message %v; want %v", frames, want)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// serverFunc serves calls with a function.
type serverFunc func(context.Context, *runtime.Message) *runtime.Message

func (f serverFunc) ServeMessage(ctx context.Context, m *runtime.Message) *runtime.Message {
	return f(ctx, m)
}

// TestBatchedCancel: calls in flight at once to a node that reads
// batches, half of them cancelled while their handlers run: each
// cancelled one ends its own handler's ctx and no other's, and the rest
// get their own replies.
func TestBatchedCancel(t *testing.T) {
	b := natstest.Start(t)
	newT := func() *Transport {
		tr, err := New(WithURL(b.URL()))
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	const calls = 32
	started, ended := make(chan string, calls), make(chan string, calls)
	release := make(chan struct{})
	l, err := newT().Listen("", serverFunc(func(ctx context.Context, m *runtime.Message) *runtime.Message {
		started <- string(m.Payload)
		select {
		case <-ctx.Done():
			ended <- string(m.Payload)
			return nil
		case <-release:
			return &runtime.Message{Payload: m.Payload}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rc, err := newT().Dial(t.Context(), l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if c := rc.(*Conn); !c.batch.Load() {
		t.Fatal("the node's pong did not say it reads batches")
	}
	cancels := make([]context.CancelFunc, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		ctx, cancel := context.WithCancel(t.Context())
		cancels[i] = cancel
		wg.Go(func() {
			defer cancel()
			want := strconv.Itoa(i)
			r, err := rc.Call(ctx, &runtime.Message{Pattern: "role:block", Payload: []byte(want)})
			switch {
			case i%2 == 0 && !errors.Is(err, context.Canceled):
				errs[i] = fmt.Errorf("call %d, cancelled: %v, %v", i, r, err)
			case i%2 == 1 && (err != nil || string(r.Payload) != want):
				errs[i] = fmt.Errorf("call %d: %v, %v", i, r, err)
			}
		})
	}
	for range calls {
		testwait.Recv(t, started)
	}
	for i := 0; i < calls; i += 2 {
		cancels[i]()
	}
	got := map[string]bool{}
	for range calls / 2 {
		got[testwait.Recv(t, ended)] = true
	}
	for i := 0; i < calls; i += 2 {
		if !got[strconv.Itoa(i)] {
			t.Errorf("the handler of cancelled call %d did not end; those that did: %v", i, got)
		}
	}
	close(release)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
