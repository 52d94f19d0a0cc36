package tcp_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// slowPeer dials, with keep-alive's interval and timeout, a peer that
// writes the server's handshake and then reads and writes nothing more
// (a process starved or paused, whose host's kernel still acknowledges
// what it is sent); the connection and the peer's end close when t ends.
func slowPeer(t *testing.T, interval, timeout time.Duration) (runtime.Conn, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	held := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Write([]byte(wire.Magic + "\x01\x00\x00\x00"))
		held <- c
	}()
	tr, err := tcp.New(tcp.WithKeepAlive(interval, timeout))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tr.Dial(t.Context(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer := <-held
	t.Cleanup(func() {
		conn.Close()
		peer.Close()
	})
	return conn, ln.Addr().String()
}

// timedCall calls m on conn, guarded by a minute, and returns
// how long the call took and its error.
func timedCall(t *testing.T, conn runtime.Conn, m *runtime.Message) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a guard
	defer cancel()
	start := time.Now()
	_, err := conn.Call(ctx, m)
	return time.Since(start), err
}

// TestKeepAliveSlowProcess: a peer whose process stops reading after the
// handshake (starved, paused) while its host's kernel still acknowledges
// what it is sent keeps the connection for the keep-alive timeout from
// the busy ping, not the busy timeout (1s): the connection is not closed
// under a call that merely waits on a slow process. (Before, it closed
// about 1.1s after the call: "peer did not answer a ping in time".)
func TestKeepAliveSlowProcess(t *testing.T) {
	const interval, timeout = 100 * time.Millisecond, 3 * time.Second
	conn, _ := slowPeer(t, interval, timeout)
	d, err := timedCall(t, conn, &runtime.Message{Pattern: "role:slow"})
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Call = %v after %v, want the keep-alive's failure", err, d)
	}
	if d < timeout {
		t.Errorf("Call failed after %v (%v), want at least the keep-alive timeout %v: the peer's kernel took the ping", d, err, timeout)
	}
}

// TestKeepAliveSlowProcessIdempotent: on the same slow peer, an idempotent
// call does not wait out the longer timeout: it is given up once the busy
// ping's timeout (1s) has run out, with an error that says the connection
// stays (its node sends the call elsewhere), and the connection stays.
func TestKeepAliveSlowProcessIdempotent(t *testing.T) {
	const interval, timeout = 100 * time.Millisecond, 20 * time.Second
	conn, addr := slowPeer(t, interval, timeout)
	d, err := timedCall(t, conn, &runtime.Message{Pattern: "role:slow", Flags: runtime.FlagIdempotent})
	want := "wizard: tcp: " + addr + ": call given up after it was sent, the connection kept: peer did not answer a ping in time, though its host acknowledged it"
	if err == nil || err.Error() != want || errors.Is(err, runtime.ErrNotSent) {
		t.Fatalf("Call = %v after %v, want %q, not matching ErrNotSent", err, d, want)
	}
	var st interface{ Stalled() bool }
	if !errors.As(err, &st) || !st.Stalled() {
		t.Errorf("Call's error %T does not say Stalled", err)
	}
	if d >= timeout/2 {
		t.Errorf("idempotent call given up after %v, want about the busy ping's timeout (1s), far below the keep-alive timeout %v", d, timeout)
	}
	select {
	case <-conn.Done():
		t.Error("the connection ended with the idempotent call")
	default:
	}
}
