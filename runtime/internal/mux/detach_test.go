package mux

import (
	"context"
	"errors"
	"net"
	"testing"
	"testing/synctest"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// detachedPair is a client connected over a pipe to a server served by
// ServeDetached: ended gets what end was called with.
func detachedPair(t *testing.T, h Handler) (cl *Client, stop context.CancelFunc, ended chan error, returned chan struct{}) {
	cconn, sconn := net.Pipe()
	ctx, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	ended, returned = make(chan error, 2), make(chan struct{})
	go func() {
		ServeDetached(ctx, sconn, h, Options{}, func(err error) { ended <- err })
		close(returned)
	}()
	cl, err := NewClient(cconn, Options{})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return cl, stop, ended, returned
}

// TestServeDetached: ServeDetached returns once serving has started, with
// no goroutine of it left in Serve; the connection serves calls; end is
// called once, with nil, after a graceful shutdown (ctx's end) that lets
// a call in flight finish, and after the client closed the connection;
// a failed handshake calls end with its error before ServeDetached
// returns.
func TestServeDetached(t *testing.T) {
	t.Run("shutdown", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			started, release := make(chan struct{}), make(chan struct{})
			cl, stop, ended, returned := detachedPair(t, func(ctx context.Context, req *wire.Frame) *wire.Frame {
				if string(req.Payload) == "hold" {
					close(started)
					<-release
				}
				return echo(ctx, req)
			})
			defer cl.Close()
			<-returned
			synctest.Wait()
			if n := stacksWith("mux.Serve("); n != 0 {
				t.Errorf("%d goroutines in Serve after ServeDetached returned, want none", n)
			}
			resp, err := cl.Call(t.Context(), &wire.Frame{Payload: []byte("hi")})
			if err != nil || string(resp.Payload) != "hi" {
				t.Fatalf("Call = %q, %v; want hi", resp.Payload, err)
			}
			held := make(chan error, 1)
			go func() {
				_, err := cl.Call(t.Context(), &wire.Frame{Payload: []byte("hold")})
				held <- err
			}()
			<-started
			stop() // graceful: the held call finishes
			synctest.Wait()
			select {
			case err := <-ended:
				t.Fatalf("end called with %v while a call was in flight", err)
			default:
			}
			close(release)
			if err := <-held; err != nil {
				t.Errorf("the call in flight at shutdown failed: %v", err)
			}
			if err := <-ended; err != nil {
				t.Errorf("end(%v) after a graceful shutdown, want nil", err)
			}
			synctest.Wait()
			if len(ended) != 0 {
				t.Errorf("end called more than once")
			}
		})
	})

	t.Run("client closes", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cl, stop, ended, returned := detachedPair(t, echo)
			defer stop()
			<-returned
			if _, err := cl.Call(t.Context(), &wire.Frame{}); err != nil {
				t.Fatal(err)
			}
			cl.Close()
			if err := <-ended; err != nil {
				t.Errorf("end(%v) after the client closed, want nil", err)
			}
		})
	})

	t.Run("bad handshake", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cconn, sconn := net.Pipe()
			go func() {
				cconn.Write([]byte("not a wizard handshake at all"))
				cconn.Close()
			}()
			var got error
			calls := 0
			ServeDetached(t.Context(), sconn, echo, Options{}, func(err error) { got = err; calls++ })
			if calls != 1 || !errors.Is(got, wire.ErrBadMagic) {
				t.Errorf("end called %d times before ServeDetached returned, with %v; want once, with %v", calls, got, wire.ErrBadMagic)
			}
		})
	})
}
