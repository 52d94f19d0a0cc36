package mux

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// stuckServer accepts one TCP connection, handshakes and then reads
// nothing until the test ends, so that the client's socket fills up.
func stuckServer(t *testing.T) string {
	return rawServer(t, func(r *raw) {
		r.conn.(*net.TCPConn).SetReadBuffer(16 << 10)
		r.handshake()
		<-r.t.Context().Done()
		r.conn.Close()
	})
}

// dialSending dials addr with a small socket send buffer and waits until
// the client's writer is idle, so that the next call is written by its
// caller (see send.go).
func dialSending(t *testing.T, addr string) *Client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	conn.(*net.TCPConn).SetWriteBuffer(16 << 10)
	cl, err := NewClient(conn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	if cl.c.tw == nil {
		t.Fatal("no direct writes on a TCP connection")
	}
	testwait.Until(t, "the writer is idle", func() bool {
		cl.c.mu.Lock()
		defer cl.c.mu.Unlock()
		return cl.c.wIdle
	})
	return cl
}

// pendingCalls returns how many calls of cl wait for an answer.
func pendingCalls(cl *Client) int {
	cl.c.mu.Lock()
	defer cl.c.mu.Unlock()
	return len(cl.pending)
}

// bigFrame is larger than what the kernel's buffers between a client and a
// stuckServer hold.
func bigFrame(pattern string) *wire.Frame {
	return &wire.Frame{Pattern: pattern, Payload: make([]byte, 3<<20)}
}

func TestSendDirect(t *testing.T) {
	t.Run("round trip", func(t *testing.T) {
		leak.Check(t)
		s := listen(t, echo, Options{})
		cl := dialAddr(t, s.addr, Options{})
		// Serial calls find the writer idle, mostly; parallel ones find
		// it at work, or a caller writing, and queue behind.
		for i := range 100 {
			if resp, err := cl.Call(t.Context(), reqFrame(0, "x")); err != nil || string(resp.Payload) != "x" {
				t.Fatalf("call %d: %v, %v", i, resp, err)
			}
		}
		testConcurrentCalls(t, cl)
	})

	t.Run("rest goes to the writer", func(t *testing.T) {
		leak.Check(t)
		// A's caller writes what the kernel takes of A and hands the rest
		// to the writer, which stays stuck in it; B and C wait in the
		// queue. Closing fails A as lost (some of it left) and B, C as
		// not sent.
		cl := dialSending(t, stuckServer(t))
		errs := map[string]chan error{}
		call := func(name string, f *wire.Frame) {
			ch := make(chan error, 1)
			errs[name] = ch
			go func() {
				_, err := cl.Call(t.Context(), f)
				ch <- err
			}()
		}
		call("A", bigFrame("A"))
		testwait.Until(t, "A's caller wrote some of A", func() bool { return cl.c.written.Load() == 1 })
		call("B", reqFrame(0, "B"))
		call("C", reqFrame(0, "C"))
		testwait.Until(t, "B and C wait", func() bool { return pendingCalls(cl) == 3 })
		cl.Close()
		got := map[string]string{}
		for name, ch := range errs {
			got[name] = closedFate(testwait.Recv(t, ch))
		}
		want := map[string]string{"A": "lost", "B": "not sent", "C": "not sent"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})

	t.Run("caller never waits on the socket", func(t *testing.T) {
		leak.Check(t)
		// The socket is full, the writer stuck in A's rest: A's caller
		// still returns when its context ends, and so does B's, queued.
		cl := dialSending(t, stuckServer(t))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 2)
		go func() {
			_, err := cl.Call(ctx, bigFrame("A"))
			done <- err
		}()
		testwait.Until(t, "A's caller wrote some of A", func() bool { return cl.c.written.Load() == 1 })
		go func() {
			_, err := cl.Call(ctx, reqFrame(0, "B"))
			done <- err
		}()
		testwait.Until(t, "B waits", func() bool { return pendingCalls(cl) == 2 })
		cancel()
		for range 2 {
			if err := testwait.Recv(t, done); !errors.Is(err, context.Canceled) {
				t.Errorf("Call = %v, want context.Canceled", err)
			}
		}
	})
}

// TestSendDirectRefused checks that a lone call on a connection the server
// reset fails as not sent, whether its caller's write or the reader finds
// the reset first.
func TestSendDirectRefused(t *testing.T) {
	leak.Check(t)
	reset := make(chan struct{})
	addr := rawServer(t, func(r *raw) {
		r.handshake()
		r.conn.(*net.TCPConn).SetLinger(0)
		r.conn.Close()
		close(reset)
	})
	cl := dialSending(t, addr)
	testwait.Recv(t, reset)
	_, err := cl.Call(t.Context(), reqFrame(0, "x"))
	if !errors.Is(err, ErrNotSent) || errors.Is(err, ErrConnLost) {
		t.Errorf("Call = %v, want ErrNotSent", err)
	}
}
