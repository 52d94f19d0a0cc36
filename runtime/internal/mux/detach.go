package mux

import (
	"context"
	"errors"
	"io"
)

// errDetached is what Serve returns to ServeDetached once serving has
// started.
var errDetached = errors.New("wizard: mux: serving detached")

// ServeDetached serves the connection over rw as [Serve] does, but
// returns once the handshake is done and serving has started, and calls
// end with what Serve would have returned, on a goroutine of its own, once
// the connection has ended and every handler has returned. No goroutine
// waits on the connection meanwhile: an idle connection costs its reader
// and its writer only. When the handshake fails, end is called before
// ServeDetached returns. end must not be nil.
func ServeDetached(ctx context.Context, rw io.ReadWriteCloser, h Handler, opts Options, end func(error)) {
	opts.end = end
	if err := Serve(ctx, rw, h, opts); err != errDetached {
		end(err)
	}
}

// detachedNow is the channel detached returns to ServeDetached's Serve.
var detachedNow = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// detached returns a closed channel when Serve was called by
// ServeDetached, else nil: Serve's wait on the connection takes it, unless
// ctx or the connection have already ended (then Serve ends as it does
// when not detached).
func (s *server) detached() <-chan struct{} {
	if s.c.opts.end == nil {
		return nil
	}
	return detachedNow
}

// detach arranges for Serve's end without a goroutine waiting for it:
// ctx's end starts the graceful shutdown, and the connection's end runs
// the rest of Serve (finish) and hands its result to end.
func (s *server) detach(ctx context.Context) {
	c := s.c
	shut := make(chan struct{}) // closed when a shutdown started by ctx returned
	stop := context.AfterFunc(ctx, func() {
		defer close(shut)
		s.shutdown()
	})
	end := func() {
		if !stop() {
			<-shut // the shutdown has begun: it returns once the connection ended
		}
		c.opts.end(s.finish(ctx))
	}
	c.mu.Lock()
	if !c.ended {
		c.onEnd = end
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	go end()
}
