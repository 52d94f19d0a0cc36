package mux

import (
	"encoding/binary"
	"errors"
	"net"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// Serving inline. Handing a request to a worker costs a goroutine wake
// before its handler runs, most of a lone call's time on the server. So
// the reader serves a request itself when a handler slot is free and no
// request waits for one, and goes back to reading once the handler has
// returned. Reading must never wait on a slow handler, though: a watch
// timer hands the reader role to a new goroutine when a handler has been
// running for between handOverAfter and twice that. The handler's goroutine keeps
// the call and, once it has answered, serves on as a worker. A request
// served inline is a request like any other: it counts against
// MaxInFlight and its caller's share, is found by cancels, drains with
// the connection and is cancelled when the connection ends (the new
// reader finds the stream closed at once, so Serve does not wait on the
// handler).
//
// The watch does not cost a timer per request (arming a timer that is the
// process's earliest wakes the network poller's thread: a cross-thread
// wake, the very cost inline serving saves), nor one per connection: a
// [Watcher], shared by the connections of a listener (Options.Watch; a
// connection without one makes its own), ticks every handOverAfter while
// some of them serve inline, and scans only those, each until a period
// without a request served inline; the next one registers it again (see
// watcher.go). A tick that finds the same request running as the tick
// before hands its reading over.
//
// Only streams that are a net.Conn (TCP and TLS connections) serve
// inline. A QUIC stream does not: its reads and writes go through the
// QUIC connection's own goroutine anyway, so serving inline saves no
// hand-off and holds up the stream's reader (bench/'s one-caller QUIC
// rows show it).
//
// Requests that come together are served inline too, one after another,
// while handlers are fast: handing each to a worker and its answer to
// the writer costs two goroutine wakes a call, more than a fast handler
// takes. Their answers wait in the write queue without waking the writer
// (holdLocked) and leave together once the reader has nothing more to
// read (written by the reader itself with the batch's last answer when
// the writer is idle: see direct.go), or its role is handed over, or it
// waits for room. Once handlers
// served inline are seen to take longer (batchInlineMax on average, one
// handler in timeEvery timed), requests with more buffered behind them
// go to workers, which serve them side by side, as many as there are
// cores; a lone request is still served inline, and so is one in
// probeEvery of the others, so that the cost is measured again.
//
// A connection whose handlers keep running past the bound would pay a
// hand-over, a new goroutine, per request: after one, its next requests
// go to workers again (inlineBackoff of them, doubling with every
// hand-over in a row up to maxInlineBackoff) before the reader tries once
// more.

// handOverAfter is the watch's period: a handler served inline holds up
// reading for at most twice that (and the timer's lateness).
const handOverAfter = 100 * time.Microsecond

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
	if _, s.inlineOn = c.rw.(net.Conn); s.inlineOn {
		s.watcher = c.opts.Watch
		if s.watcher == nil {
			s.watcher = NewWatcher() // the connection's own
		}
	}
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
	err := s.readRequests()
	if err == errHandedOver {
		return
	}
	s.c.fail(err)
	s.c.wg.Done()
}

// inlineLocked reports whether the reader serves r itself (c.mu is held;
// r has a handler slot): on a net.Conn, not while it backs off after a
// hand-over, and, with more requests buffered behind r, only while
// handlers are fast (or for one probe in probeEvery).
func (s *server) inlineLocked(r *request) bool {
	if !s.inlineOn {
		return false
	}
	if s.skip > 0 {
		s.skip--
		return false
	}
	if s.cost > batchInlineMax && s.more {
		// Not alone, and handlers take long: workers serve these side
		// by side. One in probeEvery is served inline all the same, so
		// that the cost is measured again.
		if s.probes++; s.probes%probeEvery != 0 {
			return false
		}
	}
	r.inline = true
	r.timed = s.inlineSeq%timeEvery == 0 || s.cost > batchInlineMax
	s.inlineReq = r
	s.inlineSeq++
	if !s.watching {
		s.watching = true
		s.watcher.add(s)
	}
	return true
}

// serveInline serves r on the reader's goroutine. It returns nil when the
// reader goes on reading, errHandedOver when the handler ran past the
// bound and this goroutine served on as a worker until told to leave.
func (s *server) serveInline(r *request, w *worker) error {
	next := r.serve(w)
	if r.inline {
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
	s.freeSlot()
	s.backoff = 0
	return true
}

// batchInlineMax is the average handler time (see observe) up to which
// the reader serves inline requests that have more buffered behind them;
// above it they go to workers, as many running side by side as there are
// cores, and one in probeEvery is served inline to measure again.
const (
	batchInlineMax = int64(20 * time.Microsecond)
	probeEvery     = 64
)

// timeEvery is how often a handler served inline is timed while
// handlers are fast: one in timeEvery (reading the clock twice costs
// more than a tenth of the mux's share of a call). Once they are seen to
// take long, every one served inline is, so that the next fast ones are
// seen soon.
const timeEvery = 8

// observe counts the time d of a timed handler in the average cost (each
// new time weighs a quarter); c.mu is held. A handler's time is the wall
// clock's: on a loaded machine a fast handler's thread may lose its core
// for a while, or the handler assist the garbage collector, so a time is
// counted as twice batchInlineMax at most: it takes three long ones in a
// row for requests to go to workers, not one outlier.
func (s *server) observe(d time.Duration) {
	s.cost += (min(int64(d), 2*batchInlineMax) - s.cost) / 4
}

// moreBuffered reports whether a whole frame is buffered to read: the
// reader's next read takes nothing from the stream. Only the goroutine
// holding the reader role calls it.
func (s *server) moreBuffered() bool {
	br := s.c.br
	n := br.Buffered()
	if n < 4 {
		return false
	}
	p, _ := br.Peek(4) // buffered: Peek reads nothing
	return uint64(n) >= 4+uint64(binary.BigEndian.Uint32(p))
}

// holdLocked queues the answer buf of a request the reader served inline
// without waking the writer, when more requests are buffered behind it:
// the answers of the whole batch then leave together, once the reader
// has nothing more to read (flushRead), a hand-over takes its role
// (server.tick) or the reader waits for room (waitRoom). The writer is
// woken as well when the answers held reach bufferSize, so that it writes them
// while the reader serves on. It reports false when buf is to be queued
// as any answer is; c.mu is held, on the reader.
func (s *server) holdLocked(buf *[]byte) bool {
	c := s.c
	if s.draining || c.wclosed || c.quit || !s.more {
		return false
	}
	c.q = append(c.q, outFrame{buf: buf})
	c.addQueued(cap(*buf))
	s.held += cap(*buf)
	s.holding = true
	if s.held >= bufferSize {
		s.flushLocked()
	}
	return true
}

// flushLocked wakes the writer for the answers holdLocked queued; c.mu
// is held.
func (s *server) flushLocked() {
	c := s.c
	if s.held == 0 {
		return
	}
	s.held = 0
	if len(c.q) > 0 && !c.direct {
		c.wakeWriter()
	}
}

// readRequests is the server's conn.readFrames: it reads every frame
// into a request of its own (see newRequest), so that a request with a
// small body costs one allocation, its frame's body and metadata in it,
// and reuses the request for the next frame when the frame was not a
// request the server took. Once nothing more is buffered to read, it
// lets the answers held for the batch leave.
func (s *server) readRequests() error {
	c := s.c
	r := s.newRequest()
	for {
		if _, err := wire.ReadFrame(c.br, c.opts.MaxFrameSize, &r.frame, r.buf.body[:0]); err != nil {
			return readError(err, c.opts.MaxFrameSize)
		}
		if !c.read.Load() { // a load per frame, a store once per ping
			c.read.Store(true)
		}
		s.more = s.moreBuffered()
		took, err := s.dispatch(r)
		if err != nil {
			return err
		}
		if took {
			r = s.newRequest()
		} else {
			*r = request{s: s, buf: r.buf, room: r.room} // no handler saw r: its room is untouched
			r.frame.Meta = r.buf.meta[:0]
		}
		s.flushRead()
	}
}

// flushRead lets the answers held for the batch leave once nothing more
// is buffered to read.
func (s *server) flushRead() {
	if s.holding && !s.more {
		s.holding = false
		c := s.c
		c.mu.Lock()
		s.flushLocked()
		c.mu.Unlock()
	}
}
