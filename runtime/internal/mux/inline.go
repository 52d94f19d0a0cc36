package mux

import (
	"errors"
	"time"
)

// Serving inline. Handing a request to a worker costs a goroutine wake
// before its handler runs, most of a lone call's time on the server. So
// the reader serves a request itself when a handler slot is free and no
// request waits for one, and goes back to reading once the handler has
// returned. Reading must never wait on a slow handler, though: a timer
// armed for handOverAfter hands the reader role to a new goroutine when
// the handler is still running by then. The handler's goroutine keeps
// the call and, once it has answered, serves on as a worker. A request
// served inline is a request like any other: it counts against
// MaxInFlight and its caller's share, is found by cancels, drains with
// the connection and is cancelled when the connection ends (the new
// reader finds the stream closed at once, so Serve does not wait on the
// handler).
//
// A connection whose handlers keep running past the bound would pay a
// hand-over, a new goroutine, per request: after one, its next requests
// go to workers again (inlineBackoff of them, doubling with every
// hand-over in a row up to maxInlineBackoff) before the reader tries once
// more.

// handOverAfter is how long a handler served inline may hold up reading.
const handOverAfter = 50 * time.Microsecond

// inlineBackoff and maxInlineBackoff bound how many requests go to
// workers after a hand-over before the reader serves one inline again.
const (
	inlineBackoff    = 8
	maxInlineBackoff = 4096
)

// errHandedOver ends the read loop of a goroutine whose handler ran past
// handOverAfter: another goroutine holds the reader role.
var errHandedOver = errors.New("wizard: mux: reader handed over")

// startReading runs the writer and keep-alive goroutines, as conn.start
// does, and the reader role on a goroutine of its own. The reader role
// holds one count of c.wg wherever it moves: its last holder releases it.
func (s *server) startReading() {
	c := s.c
	c.wg.Add(2)
	go c.writeLoop()
	go s.read()
	if c.opts.KeepAlive > 0 {
		c.wg.Add(1)
		go c.keepAlive()
	}
}

// read holds the reader role until the stream fails, or until it serves a
// request inline past handOverAfter and hands the role over.
func (s *server) read() {
	err := s.c.readFrames(s.dispatch)
	if err == errHandedOver {
		return
	}
	s.c.fail(err)
	s.c.wg.Done()
}

// inlineLocked reports whether the reader serves r itself (c.mu is held;
// r has a handler slot): not while it backs off after a hand-over.
func (s *server) inlineLocked(r *request) bool {
	if s.skip > 0 {
		s.skip--
		return false
	}
	r.inline = true
	s.inlineReq = r
	if s.handover == nil { // made here, stopped, so that takeOver finds it set
		s.handover = time.AfterFunc(time.Hour, s.takeOver)
		s.handover.Stop()
	}
	return true
}

// serveInline serves r on the reader's goroutine. It returns nil when the
// reader goes on reading, errHandedOver when the handler ran past the
// bound and this goroutine served on as a worker until told to leave.
func (s *server) serveInline(r *request, w *worker) error {
	s.handover.Reset(handOverAfter)
	next := r.serve(w)
	if r.inline {
		s.handover.Stop()
		return nil
	}
	for {
		if next == nil { // w was parked
			if next = <-w.next; next == nil {
				return errHandedOver // told to leave
			}
		}
		next = next.serve(w)
	}
}

// readerWorker returns the worker handle of the goroutine holding the
// reader role, which it keeps if it hands the role over; c.mu is held.
func (s *server) readerWorker() *worker {
	if s.readerW == nil {
		s.readerW = &worker{next: make(chan *request, 1)}
	}
	return s.readerW
}

// keepsReading reports whether r was served inline by a reader that
// still holds its role; then it frees r's handler slot. A request whose
// handler ran past the bound is served on as by a worker. c.mu is held.
func (s *server) keepsReading(r *request) bool {
	if !r.inline {
		return false
	}
	if s.inlineReq != r {
		r.inline = false // handed over
		return false
	}
	s.inlineReq = nil
	s.running--
	s.backoff = 0
	return true
}

// takeOver runs when a handler served inline is still running after
// handOverAfter: this goroutine takes the reader role. (A timer that
// fired late, for a request that has returned, finds nothing to take
// over, or hands over the next request early, which costs only time.)
func (s *server) takeOver() {
	c := s.c
	c.mu.Lock()
	if s.inlineReq == nil {
		c.mu.Unlock()
		return
	}
	s.inlineReq = nil
	s.readerW = nil // the handler's goroutine keeps its handle as a worker
	s.backoff = min(max(2*s.backoff, inlineBackoff), maxInlineBackoff)
	s.skip = s.backoff
	c.mu.Unlock()
	s.read()
}
