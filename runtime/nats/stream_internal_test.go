package nats

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/flow"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// newTestStream returns a stream with no broker connection (its
// publishes fail, unseen): its flow control and waits alone.
func newTestStream() *stream {
	st := new(stream)
	st.init(nil, "wizard.node.x", "", "wizard: nats: wizard.node.x", func() int { return wire.DefaultMaxFrameSize }, wire.InitialWindow, false, nil)
	return st
}

// TestStreamWaits: a Send without credit and a Recv without a message
// wait until their ctx's deadline, and no longer; credit and a message
// end the waits at once.
func TestStreamWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newTestStream()
		st.flow.Spend(wire.InitialWindow - wire.MessageCost) // all the credit
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		sent, received := make(chan error, 1), make(chan error, 1)
		go func() { sent <- st.send(ctx, wire.CodecNone, []byte("x"), errSendClosed) }()
		go func() {
			_, _, err := st.recv(ctx)
			received <- err
		}()
		synctest.Wait()
		if len(sent) > 0 || len(received) > 0 {
			t.Fatal("Send without credit or Recv without a message returned")
		}
		time.Sleep(5 * time.Second) // the bubble's clock: to the deadline
		synctest.Wait()
		if err := <-sent; !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Send: %v, want deadline exceeded", err)
		}
		if err := <-received; !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Recv: %v, want deadline exceeded", err)
		}

		// Credit and a message end the waits.
		go func() { sent <- st.send(t.Context(), wire.CodecNone, []byte("x"), errSendClosed) }()
		go func() {
			_, _, err := st.recv(t.Context())
			received <- err
		}()
		synctest.Wait()
		if !st.deliver(wire.CodecNone, []byte("y")) {
			t.Fatal("a message within the window refused")
		}
		synctest.Wait()
		if err := <-received; err != nil {
			t.Errorf("Recv: %v", err)
		}
		if err := st.addCredit(wire.AppendCredit(nil, 1+wire.MessageCost)); err != nil { // the cost of "x"
			t.Fatal(err)
		}
		synctest.Wait()
		// The publish fails (no broker connection): the stream is lost.
		if err := <-sent; err == nil {
			t.Error("Send without a broker connection succeeded")
		}
	})
}

// TestStreamServerDeadline: a node's stream ends its Recv at the open's
// deadline, with deadline exceeded, through the handler's ctx.
func TestStreamServerDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newTestStream()
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(3*time.Second))
		defer cancel()
		stop := context.AfterFunc(ctx, func() { st.fail(ctx.Err()) })
		defer stop()
		received := make(chan error, 1)
		go func() {
			_, _, err := st.recv(context.Background()) // a handler waiting with another ctx
			received <- err
		}()
		time.Sleep(3*time.Second - time.Nanosecond)
		synctest.Wait()
		if len(received) > 0 {
			t.Fatal("Recv returned before the deadline")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if err := <-received; !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Recv: %v, want deadline exceeded", err)
		}
	})
}

// TestStreamWindowGrows: the default window of a stream of large
// messages whose reader keeps up doubles at each grant up to
// flow.MaxGrown, out of its caller's budget, which gets it back at
// the stream's end; small messages leave it as it is.
func TestStreamWindowGrows(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		want int
	}{
		{"large", 64 << 10, flow.MaxGrown},
		{"small", 1 << 10, wire.InitialWindow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var budget atomic.Int64
			st := newTestStream()
			st.flow.Init(wire.InitialWindow, true, &budget)
			for i := range 4 * flow.MaxGrown / tc.size {
				if !st.deliver(wire.CodecNone, make([]byte, tc.size)) {
					t.Fatalf("message %d refused", i)
				}
				if _, _, err := st.recv(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			if st.flow.Window() != tc.want || budget.Load() != int64(tc.want-wire.InitialWindow) {
				t.Fatalf("window %d, budget used %d; want %d, %d", st.flow.Window(), budget.Load(), tc.want, tc.want-wire.InitialWindow)
			}
			st.fail(context.Canceled)
			if budget.Load() != 0 {
				t.Errorf("budget used %d after the end, want 0", budget.Load())
			}
		})
	}
}
