package mux

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// ended is what a handler saw of its context.
type ended struct {
	deadline time.Duration // 0: none
	err      error
}

// waitingHandler is a handler that runs until its context ends and
// reports how it ended, after reporting its start.
func waitingHandler(started chan<- struct{}, done chan<- ended) Handler {
	return func(ctx context.Context, req *wire.Frame) *wire.Frame {
		var e ended
		if dl, ok := ctx.Deadline(); ok {
			e.deadline = time.Until(dl).Round(time.Second)
		}
		started <- struct{}{}
		<-ctx.Done()
		e.err = ctx.Err()
		done <- e
		return &wire.Frame{Type: wire.TypeResponse}
	}
}

// TestKeptCallsBounded: a raw client sends requests that keep running
// when their connection is lost (wire.FlagKeep) and carry no deadline,
// then hangs up. The handlers end at the server's deadline for requests
// without one; Serve returns once they have.
func TestKeptCallsBounded(t *testing.T) {
	const calls = 50
	keep := func(id uint64) *wire.Frame {
		return &wire.Frame{Type: wire.TypeRequest, ID: id, Flags: wire.FlagKeep, Pattern: "role:test"}
	}

	t.Run("real sockets", func(t *testing.T) {
		leak.Check(t)
		const timeout = 200 * time.Millisecond
		started, done := make(chan struct{}, calls), make(chan ended, calls)
		s := listen(t, waitingHandler(started, done), Options{ServeTimeout: timeout})
		r := s.dialRaw(t)
		r.handshake()
		for i := range calls {
			r.send(keep(uint64(i + 1)))
		}
		for range calls {
			testwait.Recv(t, started)
		}
		r.conn.Close() // the connection is lost: kept handlers run on
		start := time.Now()
		for range calls {
			if e := testwait.Recv(t, done); e.err != context.DeadlineExceeded {
				t.Fatalf("a kept handler ended with %v, want its deadline", e.err)
			}
		}
		if d := time.Since(start); d > timeout+testwait.Guard/2 {
			t.Errorf("kept handlers ran %v after the connection was lost", d)
		}
		if err := testwait.Recv(t, s.served); err != nil && !errors.Is(err, io.EOF) {
			t.Logf("Serve = %v", err)
		}
	})

	t.Run("default", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			started, done := make(chan struct{}, calls+1), make(chan ended, calls+1)
			cconn, sconn := net.Pipe()
			served := make(chan error, 1)
			go func() { served <- Serve(t.Context(), sconn, waitingHandler(started, done), Options{}) }()
			r := newRaw(t, cconn)
			r.handshake()
			for i := range calls {
				r.send(keep(uint64(i + 1)))
			}
			// A deadline the caller gave is kept, longer or not.
			withDeadline := keep(calls + 1)
			withDeadline.Deadline = time.Hour
			r.send(withDeadline)
			for range calls + 1 {
				<-started
			}
			start := time.Now()
			cconn.Close()
			longest := time.Duration(0)
			for range calls {
				e := <-done
				if e.err != context.DeadlineExceeded || e.deadline != DefaultServeTimeout {
					t.Errorf("a kept handler without a deadline: deadline %v, ended with %v; want %v, DeadlineExceeded", e.deadline, e.err, DefaultServeTimeout)
				}
				longest = max(longest, time.Since(start))
			}
			if longest != DefaultServeTimeout {
				t.Errorf("kept handlers without a deadline ran %v after the connection was lost, want %v", longest, DefaultServeTimeout)
			}
			if e := <-done; e.deadline != time.Hour || time.Since(start) != time.Hour {
				t.Errorf("a kept handler with a deadline of an hour: deadline %v, ended after %v", e.deadline, time.Since(start))
			}
			<-served
		})
	})
}
