package mux

import (
	"bufio"
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// TestKeepAliveBusyWake: a call that starts waiting on a silent server
// wakes keep-alive's timer. With no ping out, keep-alive looks again
// after BusyKeepAlive and pings with the busy timeout; with an idle ping
// out, the wake changes nothing: the ping keeps its timeout, and no ping
// follows it.
func TestKeepAliveBusyWake(t *testing.T) {
	opts := Options{KeepAlive: time.Second, KeepAliveTimeout: 2 * time.Second}
	for _, tt := range []struct {
		name      string
		idle      time.Duration // before the call
		want      time.Duration // from the call to its failure
		wantPings int
	}{
		{"no ping out", 500 * time.Millisecond, DefaultBusyKeepAlive + DefaultBusyKeepAliveTimeout, 1},
		{"idle ping out", 1500 * time.Millisecond, 1500 * time.Millisecond, 1}, // the ping of 1s times out at 3s
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cconn, pings := countingSilentServer()
				cl, err := NewClient(cconn, opts)
				if err != nil {
					t.Fatal(err)
				}
				defer cl.Close()
				time.Sleep(tt.idle)
				start := time.Now()
				_, err = cl.Call(t.Context(), &wire.Frame{})
				if !errors.Is(err, ErrKeepAliveTimeout) {
					t.Errorf("Call = %v, want ErrKeepAliveTimeout", err)
				}
				if d := time.Since(start); d != tt.want {
					t.Errorf("silent server found %v after the call, want %v", d, tt.want)
				}
				cl.Close()
				if n := <-pings; n != tt.wantPings {
					t.Errorf("%d pings sent, want %d", n, tt.wantPings)
				}
			})
		})
	}
}

// countingSilentServer is silentServer that counts the pings it reads:
// pings gets their number once the client closed.
func countingSilentServer() (net.Conn, <-chan int) {
	cconn, sconn := net.Pipe()
	pings := make(chan int, 1)
	go func() {
		defer sconn.Close()
		br := bufio.NewReader(sconn)
		io.ReadFull(br, make([]byte, 8))
		sconn.Write([]byte("WZRD\x01\x00\x00\x00"))
		n := 0
		var f wire.Frame
		for {
			if _, err := wire.ReadFrame(br, wire.MaxFrameSize, &f, nil); err != nil {
				break
			}
			if f.Type == wire.TypePing {
				n++
			}
		}
		pings <- n
	}()
	return cconn, pings
}

// TestKeepAliveHostAcked: a busy ping the peer's host acknowledged at the
// TCP level (its process is behind, its kernel took the ping) gets the
// idle timeout, KeepAliveTimeout, from the ping; a ping nothing
// acknowledged fails the connection after BusyKeepAliveTimeout, as
// before.
func TestKeepAliveHostAcked(t *testing.T) {
	for _, tt := range []struct {
		name  string
		acked bool
		want  time.Duration // from the call to its failure
	}{
		{"acknowledged", true, DefaultBusyKeepAlive + DefaultKeepAliveTimeout},
		{"silent host", false, DefaultBusyKeepAlive + DefaultBusyKeepAliveTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cconn, _ := countingSilentServer()
				var asked []time.Duration
				opts := Options{hostAcked: func(d time.Duration) bool {
					asked = append(asked, d)
					return tt.acked
				}}
				cl, err := NewClient(cconn, opts)
				if err != nil {
					t.Fatal(err)
				}
				defer cl.Close()
				start := time.Now()
				_, err = cl.Call(t.Context(), &wire.Frame{})
				if !errors.Is(err, ErrKeepAliveTimeout) {
					t.Errorf("Call = %v, want ErrKeepAliveTimeout", err)
				}
				if d := time.Since(start); d != tt.want {
					t.Errorf("connection failed %v after the call, want %v", d, tt.want)
				}
				// Asked once, as the busy timeout ran out; the longer
				// timeout is not extended again.
				if len(asked) != 1 || asked[0] != DefaultBusyKeepAliveTimeout {
					t.Errorf("host asked for %v, want once for %v", asked, DefaultBusyKeepAliveTimeout)
				}
			})
		})
	}
}

// TestKeepAliveStalledIdempotent: when a busy ping gets the longer
// timeout because the peer's host acknowledged it (the peer is stalled,
// or its answers are lost on the way back), the idempotent calls waiting
// on the connection fail at once with ErrStalled, and the server gets a
// cancel for each, so that their node can send them elsewhere; the
// connection stays, and a call that must not run twice waits on until
// the connection ends.
func TestKeepAliveStalledIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cconn, sconn := net.Pipe()
		got := make(chan []wire.Frame, 1) // the frames the server read, without bodies
		go func() {
			defer sconn.Close()
			br := bufio.NewReader(sconn)
			io.ReadFull(br, make([]byte, 8))
			sconn.Write([]byte("WZRD\x01\x00\x00\x00"))
			var fs []wire.Frame
			for {
				var f wire.Frame
				if _, err := wire.ReadFrame(br, wire.MaxFrameSize, &f, nil); err != nil {
					break
				}
				fs = append(fs, wire.Frame{Type: f.Type, ID: f.ID, Flags: f.Flags})
			}
			got <- fs
		}()
		cl, err := NewClient(cconn, Options{hostAcked: func(time.Duration) bool { return true }})
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			err error
			at  time.Duration
		}
		start := time.Now()
		idem, once := make(chan result, 1), make(chan result, 1)
		go func() {
			_, err := cl.Call(t.Context(), &wire.Frame{Flags: wire.FlagIdempotent})
			idem <- result{err, time.Since(start)}
		}()
		go func() {
			_, err := cl.Call(t.Context(), &wire.Frame{})
			once <- result{err, time.Since(start)}
		}()

		r := <-idem
		if !errors.Is(r.err, ErrStalled) || errors.Is(r.err, ErrConnLost) || errors.Is(r.err, ErrNotSent) {
			t.Errorf("idempotent call = %v, want ErrStalled alone", r.err)
		}
		if want := DefaultBusyKeepAlive + DefaultBusyKeepAliveTimeout; r.at != want {
			t.Errorf("idempotent call given up %v after it began, want %v", r.at, want)
		}
		synctest.Wait()
		select {
		case r := <-once:
			t.Fatalf("the other call ended with the idempotent one: %v", r.err)
		default:
		}
		if err := cl.Err(); err != nil {
			t.Errorf("connection ended with the idempotent call: %v", err)
		}

		r = <-once
		if !errors.Is(r.err, ErrConnLost) || !errors.Is(r.err, ErrKeepAliveTimeout) {
			t.Errorf("non-idempotent call = %v, want ErrConnLost for ErrKeepAliveTimeout", r.err)
		}
		if want := DefaultBusyKeepAlive + DefaultKeepAliveTimeout; r.at != want {
			t.Errorf("non-idempotent call failed %v after it began, want %v", r.at, want)
		}
		cl.Close()

		var idemID, onceID uint64
		cancels := map[uint64]int{}
		for _, f := range <-got {
			switch {
			case f.Type == wire.TypeRequest && f.Flags&wire.FlagIdempotent != 0:
				idemID = f.ID
			case f.Type == wire.TypeRequest:
				onceID = f.ID
			case f.Type == wire.TypeCancel:
				cancels[f.ID]++
			}
		}
		if idemID == 0 || onceID == 0 {
			t.Fatalf("server read requests %d (idempotent) and %d, want both", idemID, onceID)
		}
		if cancels[idemID] != 1 || cancels[onceID] != 0 {
			t.Errorf("cancels by request id %v, want one for the idempotent call (%d) and none for the other (%d)", cancels, idemID, onceID)
		}
	})
}
