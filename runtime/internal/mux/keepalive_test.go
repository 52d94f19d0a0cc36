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
