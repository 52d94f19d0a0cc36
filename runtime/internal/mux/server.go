package mux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// Handler serves one request. It returns a TypeResponse or TypeError frame
// (the mux fills in the ID; a nil frame or another type is answered with an
// internal error). ctx carries the request's deadline and is cancelled by
// the caller's TypeCancel, by the loss of the connection and when the
// handler returns; its values are those of the ctx given to [Serve]. req
// and its payload belong to the handler; the returned frame is encoded
// before the handler's goroutine ends and not kept.
type Handler func(ctx context.Context, req *wire.Frame) *wire.Frame

// gRPC's code numbers, as in package runtime, for the errors the mux
// answers by itself.
const (
	codeCanceled          = 1
	codeUnknown           = 2
	codeDeadlineExceeded  = 4
	codeResourceExhausted = 8
	codeUnimplemented     = 12
	codeInternal          = 13
	codeUnavailable       = 14
)

// server is the serving side of one connection.
type server struct {
	c    *conn
	h    Handler
	base context.Context // Serve's ctx, for its values only (a request's end is its own)

	// Guarded by c.mu.
	inflight map[uint64]*request      // taken: running, or pending
	streams  map[uint64]*ServerStream // open streams, their handlers running (serverstream.go)
	nstreams int                      // of those, the ones not ending yet: at most MaxStreams
	running  int                      // of those, with a handler running (at most MaxInFlight; see takeSlot)
	pending  []*request               // the others, in the order they came
	waiting  int                      // bytes the pending requests hold (see requestCost)
	listed   bool                     // on Options.Bounds' list; guarded by the Bounds' mu
	maxID    uint64                   // the highest request id taken
	lastID   uint64                   // with draining: the highest id the goaway promised to serve
	draining bool
	closed   bool
	idle     chan struct{} // closed when draining and nothing is in flight

	// aliveAt is when the paused reader last told the client that this
	// side is alive, aliveTimer when it is due again (see aliveLocked).
	aliveAt    time.Time
	aliveTimer *time.Timer

	handlers sync.WaitGroup // every request taken, until it is answered or dropped

	// The workers (see worker.go), guarded by c.mu.
	idleWorkers []*worker
	gen         uint64      // reap periods so far
	reaper      *time.Timer // armed while workers are idle
	quiet       quiet       // sends the workers of a quiet connection away (quiet.go)
	reaping     bool
	stopped     bool // no handler runs any more: a late reap does nothing

	// Serving inline (see inline.go), guarded by c.mu.
	inlineOn  bool     // the stream is a net.Conn (TCP, TLS): set before reading starts
	inlineReq *request // served inline by the reader, which holds its role
	inlineSeq uint64   // requests served inline so far
	watched   uint64   // inlineSeq at the watch's last tick
	watching  bool     // registered with watcher, which ticks
	watcher   *Watcher // Options.Watch, or the connection's own: set before reading starts
	readerW   *worker  // the reader's handle, kept by it as a worker when it hands over
	skip      int      // requests left to give to workers before serving inline again
	backoff   int      // skip after the last hand-over; 0 once a request returned in time
	cost      int64    // handlers served inline: their average time, in ns (see observe)
	probes    uint64   // buffered requests not served inline for their cost
	held      int      // bytes of answers queued without waking the writer (see holdLocked)

	// The reader role's own: answers of its batch may wait in the queue
	// for its flush.
	holding bool
	more    bool // a whole frame is buffered behind the one being served (see moreBuffered)

	// The reader role's own: the clock reading of the requests that came
	// in one read of the stream (see arrival).
	at      time.Time
	atReads uint64 // the reader's reads when at was read
}

// Serve runs the server side of a connection over rw: it reads the
// client's handshake, answers with its own, and serves requests
// concurrently, within the bounds of opts (see the package doc), until the
// stream fails or ctx is done.
//
// When ctx is done Serve shuts down gracefully: it sends a goaway naming
// the highest request id it has taken (the client fails later calls with
// [ErrGoingAway]), serves the requests in flight and those waiting for a
// handler for at most the drain timeout, flushes their answers and closes
// the connection.
//
// Serve closes rw before it returns, after every handler it started has
// returned (handlers still running when the connection ends are
// cancelled, but for kept ones, which run to their deadline; requests
// still waiting for a handler are dropped). It returns nil after a
// graceful shutdown or when the client closed the connection between
// frames; otherwise an error saying why the connection was closed: a
// malformed or oversized frame ([wire.ErrMalformed],
// [wire.ErrFrameTooLarge]), a bad handshake ([wire.ErrBadMagic], a
// *wire.VersionError), [ErrKeepAliveTimeout], [ErrProtocol], or the
// stream's error.
func Serve(ctx context.Context, rw io.ReadWriteCloser, h Handler, opts Options) error {
	opts, err := opts.normalize()
	if err != nil {
		rw.Close()
		return err
	}
	br := newReader(rw)
	err = handshake(ctx, rw, opts.HandshakeTimeout, func() error {
		err := wire.ReadHandshake(br)
		var ve *wire.VersionError
		if err == nil || errors.As(err, &ve) {
			// Answer a client of another version too, so that it can
			// say which versions disagree.
			if werr := wire.WriteHandshakeFeatures(rw, features); err == nil {
				err = werr
			}
		}
		return err
	})
	if err != nil {
		rw.Close()
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil
		}
		err = fmt.Errorf("wizard: mux: handshake: %w", err)
		connLogger(opts.Logger, rw, "server").Warn("wizard: connection closed", "reason", err)
		return err
	}

	s := &server{
		c:        newConn(rw, br, opts, "server"),
		h:        h,
		base:     ctx, // not WithoutCancel: its Value boxes itself, one allocation per lookup
		inflight: make(map[uint64]*request),
		streams:  make(map[uint64]*ServerStream),
		idle:     make(chan struct{}),
	}
	c := s.c
	c.drained = s.startPending
	s.startReading()
	select {
	case <-ctx.Done():
		s.shutdown()
	case <-c.done:
	case <-s.detached(): // ServeDetached's: Serve returns, the connection's end runs finish
		s.detach(ctx)
		return errDetached
	}
	return s.finish(ctx)
}

// finish is the end of Serve, once the connection has ended: it waits for
// the reader and the writer, cancels the handlers still running and waits
// for them, and returns what Serve returns.
func (s *server) finish(ctx context.Context) error {
	c := s.c
	c.wg.Wait()
	c.drainQueue()
	if s.watcher != nil {
		s.watcher.remove(s) // no request is served inline any more
	}

	// Cancel the handlers that are still running and wait for them. A
	// handler of a call the client may send again on another connection
	// (wire.FlagKeep) runs on to its deadline, unless the server is
	// shutting down: the call sent again joins it.
	reason := c.reason()
	shutdown := reason == errShutdown || ctx.Err() != nil
	c.mu.Lock()
	s.closed = true
	dropped := s.pending // never started: the client sees them fail, not run
	s.pending = nil
	s.addWaiting(-s.waiting)
	for _, r := range dropped {
		delete(s.inflight, r.frame.ID)
	}
	running := make([]*request, 0, len(s.inflight))
	for _, r := range s.inflight {
		running = append(running, r)
	}
	c.mu.Unlock()
	s.failStreams(&CallError{Kind: ErrConnLost, Reason: reason})
	for range dropped {
		s.done()
	}
	kept := false
	for _, r := range running {
		if !shutdown && r.frame.Flags&wire.FlagKeep != 0 {
			kept = true
			continue
		}
		r.cancel(context.Canceled)
	}
	if kept {
		waited := make(chan struct{})
		go func() {
			s.handlers.Wait()
			close(waited)
		}()
		select {
		case <-waited:
		case <-ctx.Done(): // shutting down after all
			for _, r := range running {
				r.cancel(context.Canceled)
			}
			<-waited
		}
	}
	s.handlers.Wait()
	s.stopWorkers()
	s.leaveBounds()

	if reason == errShutdown || reason == errPeerClosed {
		return nil
	}
	return reason
}

// shutdown sends the goaway, waits for the handlers in flight (at most the
// drain timeout), lets the writer flush their answers and ends the
// connection.
func (s *server) shutdown() {
	c := s.c
	c.mu.Lock()
	s.draining = true
	s.lastID = s.maxID
	s.flushLocked()
	s.idleCheckLocked()
	c.mu.Unlock()
	c.pushControl(wire.TypeGoAway, s.lastID)

	t := time.NewTimer(c.opts.DrainTimeout)
	defer t.Stop()
	select {
	case <-s.idle:
	case <-t.C:
		c.fail(errDrainTimeout)
		return
	case <-c.done:
		return
	}
	c.mu.Lock()
	c.quit = true
	c.mu.Unlock()
	c.wakeWriter()
	select {
	case <-c.writerDone:
		c.linger(t.C)
		c.fail(errShutdown)
	case <-t.C:
		c.fail(errDrainTimeout)
	case <-c.done:
	}
}

// halfCloser is a stream that can close its sending side alone
// (*net.TCPConn, *tls.Conn): a server lingers on one (see linger); any
// other stream is closed outright.
type halfCloser interface{ CloseWrite() error }

// linger runs once every answer is written, on a stream that can close
// its sending side alone (TCP, TLS): it does, and waits until the client
// closes its side or timeout fires, reading on and dropping what still
// comes. Closing outright would answer the client's requests that cross
// the goaway with a reset, and a reset makes the client's kernel drop the
// answers it has not read yet — answers to calls that ran.
func (c *conn) linger(timeout <-chan time.Time) {
	cw, ok := c.rw.(halfCloser)
	if !ok || cw.CloseWrite() != nil {
		return
	}
	select {
	case <-c.done: // the reader saw the client close
	case <-timeout:
	}
}

// dispatch handles one frame from the client, read into r (see
// readRequests). It reports whether it took r, a request the server now
// serves or keeps; otherwise r is the reader's to read the next frame
// into.
func (s *server) dispatch(r *request) (bool, error) {
	c := s.c
	f := &r.frame
	switch f.Type {
	case wire.TypeRequest:
		r.at = s.arrival()
		if f.Deadline > 0 {
			r.deadline = r.at.Add(f.Deadline)
		} else {
			// The server's deadline, fixed when the handler first looks
			// (see request.deadlineLocked): a request costs no clock
			// reading unless its handler wants one.
			r.frame.Deadline, r.serveTimeout = c.opts.ServeTimeout, true
		}
		c.mu.Lock()
		if s.closed || (s.draining && f.ID > s.lastID) {
			c.mu.Unlock() // refused: the client fails it on the goaway
			return false, nil
		}
		if _, dup := s.inflight[f.ID]; dup {
			c.mu.Unlock()
			return false, protocolError("duplicate request id %d", f.ID)
		}
		if len(s.streams) > 0 {
			if _, dup := s.streams[f.ID]; dup {
				c.mu.Unlock()
				return false, protocolError("request id %d is an open stream's", f.ID)
			}
		}
		if sh := c.opts.Share; sh != nil && !sh.take() {
			c.mu.Unlock()
			return false, s.refuse(f)
		}
		s.inflight[f.ID] = r
		s.maxID = max(s.maxID, f.ID)
		s.handlers.Add(1)
		if len(s.pending) > 0 || !s.roomToStart(false) {
			// Every handler slot is taken, or the answers wait for the
			// writer: the request waits, and the reader goes on (it
			// answers pings, applies cancels) until the waiting requests
			// reach their bound.
			s.pending = append(s.pending, r)
			s.addWaiting(requestCost(&r.frame) + c.opts.RoomSize)
			c.mu.Unlock()
			return true, s.waitRoom()
		}
		if s.inlineLocked(r) {
			w := s.readerWorker()
			c.mu.Unlock()
			return true, s.serveInline(r, w)
		}
		w := s.takeWorker()
		c.mu.Unlock()
		s.start(r, w)
		return true, nil
	case wire.TypeCancel:
		c.mu.Lock()
		r := s.inflight[f.ID]
		c.mu.Unlock()
		if r != nil {
			r.cancel(context.Canceled)
		} else {
			s.cancelStream(f.ID)
		}
	case wire.TypePing:
		// Every ping is answered: a peer that pings faster than it reads
		// the pongs is held back by waitRoom.
		c.push(controlFrame(wire.TypePong, f.ID))
		return false, s.waitRoom()
	case wire.TypePong:
		c.pong(f.ID)
	case wire.TypeGoAway:
		// The client is leaving; it closes the connection when done.
	case wire.TypeStreamOpen, wire.TypeStreamData, wire.TypeStreamClose, wire.TypeStreamCredit:
		return false, s.dispatchStream(r)
	default:
		return false, protocolError("client sent a %v frame", f.Type)
	}
	return false, nil
}

// arrival returns when the request being dispatched came: the clock's
// reading at the first request dispatched from the read of the stream
// that brought it. Requests read together share one reading (a clock
// read costs about a tenth of the mux's part of a call), and a request's
// deadline runs from the time it was read, not from the time the
// requests before it in the same read were served. Only the goroutine
// holding the reader role calls it.
func (s *server) arrival() time.Time {
	if n := s.c.br.reads; n != s.atReads || s.at.IsZero() {
		s.at, s.atReads = time.Now(), n
	}
	return s.at
}

// errOverShare is the message of a request refused because its caller
// holds its part of the node's in-flight limit.
const errOverShare = "wizard: node is over its in-flight limit for this caller"

// refuse answers a request over its caller's share without running it,
// as a node over its limit does.
func (s *server) refuse(f *wire.Frame) error {
	if f.Flags&wire.FlagNoReply != 0 {
		return nil
	}
	out := errorFrame(f.ID, codeResourceExhausted, errOverShare)
	out.Flags = wire.FlagRefused
	buf := getBuffer(out.Size())
	*buf = wire.AppendFrame(*buf, &out)
	s.c.push(buf)
	return s.waitRoom()
}

// requestCost is what a pending request is counted for: its frame and
// what the server keeps for it besides (the request, with room for a
// small frame in it); Options.RoomSize is added for a record's room.
func requestCost(f *wire.Frame) int {
	return f.Size() + requestSize
}

// waitRoom pauses the reader while the connection is at one of its
// bounds: MaxQueued bytes of requests waiting for a handler, or MaxQueued
// bytes of frames waiting for the writer. A handler taking a waiting
// request, or the writer catching up, wakes it. Meanwhile the client's
// frames wait in the kernel, whose TCP window then holds the client back.
// It returns the connection's end reason if the connection ends
// meanwhile.
func (s *server) waitRoom() error {
	c := s.c
	held := false // paused because requests wait for handlers: this side is slow
	defer func() {
		if held {
			c.holds.Add(1)
		}
	}()
	c.mu.Lock()
	for {
		s.startPending()
		if !s.atBound() {
			c.mu.Unlock()
			return nil
		}
		if b := c.opts.Bounds; b != nil {
			b.list(s) // another stream freeing room wakes the reader
			if !s.atBound() {
				continue
			}
		}
		holding := s.waitingFull() && !c.full()
		if holding != held {
			c.holds.Add(1)
			held = holding
		}
		c.paused = true
		s.flushLocked() // the answers held for the reader's flush must leave
		var alive <-chan time.Time
		if held && c.opts.KeepAlive > 0 {
			alive = s.aliveLocked()
		}
		c.mu.Unlock()
		select {
		case <-c.room:
		case <-alive:
		case <-c.done:
			return c.reason()
		}
		c.mu.Lock()
	}
}

// aliveLocked tells the client, at most once per BusyKeepAlive, that this
// side is alive though its reader is paused because requests wait for
// its handlers: the client's pings wait unread behind its requests
// meanwhile, and a client whose callers send faster than the handlers
// run (no-reply requests, which no answer paces) would take the silence
// for a dead server. It sends a pong with id 0, which answers no ping but
// is a frame from this side (see keeper). It returns a channel that
// fires when the next one is due, for the paused reader to wait on too;
// c.mu is held.
func (s *server) aliveLocked() <-chan time.Time {
	c := s.c
	now := time.Now()
	if next := s.aliveAt.Add(c.opts.BusyKeepAlive); now.Before(next) {
		s.aliveTimer.Reset(next.Sub(now))
		return s.aliveTimer.C
	}
	s.aliveAt = now
	if len(c.q) < 2*c.opts.WriteQueue {
		c.pushLocked(outFrame{buf: controlFrame(wire.TypePong, 0)})
	}
	if s.aliveTimer == nil {
		s.aliveTimer = time.NewTimer(c.opts.BusyKeepAlive)
	} else {
		s.aliveTimer.Reset(c.opts.BusyKeepAlive)
	}
	return s.aliveTimer.C
}

// serve runs the handler for r on worker w, queues its answer and
// retires r. It returns the next request waiting for a handler, for w to
// serve, or nil once it has parked w.
func (r *request) serve(w *worker) *request {
	s := r.s
	c := s.c
	var start time.Time
	if r.timed {
		start = time.Now()
	}
	resp := s.call(r)
	r.cancel(context.Canceled) // the handler has returned
	id := r.frame.ID

	var buf *[]byte
	if r.frame.Flags&wire.FlagNoReply == 0 {
		out := *resp
		out.ID = id
		if size := out.Size(); size-4 > c.opts.MaxFrameSize {
			out = errorFrame(id, codeResourceExhausted, fmt.Sprintf("wizard: response of %d bytes exceeds the frame limit of %d", size-4, c.opts.MaxFrameSize))
		}
		buf = getBuffer(out.Size())
		*buf = wire.AppendFrame(*buf, &out)
	}

	// The answer is queued at once, whatever the queue holds: the reader
	// stops taking requests while the queue is over its bound in bytes,
	// so answers are bounded by that and by MaxInFlight.
	c.mu.Lock()
	reading := s.keepsReading(r)
	if reading && r.timed {
		s.observe(time.Since(start))
	}
	// The caller's share counts the request as answered before the answer
	// can reach it: a caller that sends its next call on receipt must find
	// its part of the budget free again. A request the reader served
	// inline ran for at most the hand-over bound: its read's clock reading
	// stands for the time it was answered (see Share.release).
	var answered time.Time
	if reading {
		answered = r.at
	}
	s.releaseShareAt(answered)
	direct := false
	var before []outFrame // frames queued before buf, written with it (see direct.go)
	switch {
	case buf == nil:
	case reading && s.holdLocked(buf):
		// More requests are buffered: the answer waits in the queue
		// for the reader's flush (see inline.go).
	default:
		if reading {
			direct, before = s.directLocked()
		}
		if !direct {
			c.pushLocked(outFrame{buf: buf}) // dropped if the connection has ended
			if reading {
				s.holding = false
				s.flushLocked()
			}
		}
	}
	delete(s.inflight, id)
	var next *request
	if reading {
		// Served inline: the reader goes back to reading (inline.go).
		// If it was the last request running, the workers that parked
		// while it ran (and so did not arm the quiet timer) are idle now.
		if s.running == 0 && len(s.pending) == 0 && len(s.idleWorkers) > 0 {
			s.armQuiet()
		}
	} else if len(s.pending) > 0 && !c.full() && !s.yields() {
		next = s.popPending() // on this worker, whose stack is warm
	} else {
		if b := c.opts.Bounds; b != nil && len(s.pending) > 0 {
			b.listLast(s) // the slot goes to the streams listed before
		}
		s.freeSlot()
		s.parkWorker(w)
	}
	s.idleCheckLocked()
	c.mu.Unlock()
	if direct {
		c.writeDirect(buf, before)
	}
	s.release(r)
	s.handlers.Done()
	return next
}

// release tells r's room that the server is done with r (Options.Done):
// its answer is encoded and nothing of the mux reads its buffer again.
// The frame's fields that point into the buffer are cleared first, for
// a record that outlives the request (its context, kept by a handler).
func (s *server) release(r *request) {
	done := s.c.opts.Done
	if done == nil || r.room == nil {
		return
	}
	r.frame.Pattern, r.frame.Meta, r.frame.Payload = "", nil, nil
	done(r.room)
}

// popPending takes the first request waiting for a handler; c.mu is held.
func (s *server) popPending() *request {
	r := s.pending[0]
	s.pending[0] = nil
	if s.pending = s.pending[1:]; len(s.pending) == 0 {
		s.pending = nil // let the backing array go
	}
	s.addWaiting(-(requestCost(&r.frame) + s.c.opts.RoomSize))
	s.c.wakeLocked()
	return r
}

// startPending starts waiting requests while there is room: a handler
// slot, and the answers below their bound. The writer calls it, with
// c.mu held, when it has caught up: the reader may be waiting for the
// client, and the handlers all returned.
func (s *server) startPending() { s.startWaiting(false) }

// startWaiting is startPending; turn says that the stream's connection
// bounds are looking at it (see [Bounds]): it goes before the streams
// listed after it.
func (s *server) startWaiting(turn bool) {
	for len(s.pending) > 0 && !s.closed && s.roomToStart(turn) {
		s.start(s.popPending(), s.takeWorker()) // neither waits
	}
}

// done retires a request taken from the client and dropped with the
// connection before it started; serve retires an answered one in the
// same two steps, the share's first.
func (s *server) done() {
	s.releaseShare()
	s.handlers.Done()
}

// releaseShare gives the request's part of the caller's share back.
func (s *server) releaseShare() { s.releaseShareAt(time.Time{}) }

// releaseShareAt is releaseShare for a request answered at now (zero: the
// share reads the clock if it needs the time).
func (s *server) releaseShareAt(now time.Time) {
	if sh := s.c.opts.Share; sh != nil {
		sh.releaseAt(now)
	}
}

// call runs the handler, turning a panic or a frame of the wrong type into
// an internal error (the panic is logged with its stack, never sent).
func (s *server) call(r *request) (resp *wire.Frame) {
	defer func() {
		if p := recover(); p != nil {
			s.c.log.Error("wizard: handler panicked", "pattern", r.frame.Pattern, "panic", p, "stack", string(debug.Stack()))
			f := errorFrame(r.frame.ID, codeInternal, "wizard: internal error")
			resp = &f
		}
	}()
	resp = s.h(r, &r.frame)
	switch {
	case resp == nil:
		f := errorFrame(r.frame.ID, codeInternal, "wizard: handler returned no answer")
		resp = &f
	case resp.Type != wire.TypeResponse && resp.Type != wire.TypeError:
		f := errorFrame(r.frame.ID, codeInternal, "wizard: handler answered with a "+resp.Type.String()+" frame")
		resp = &f
	}
	return resp
}

// errorFrame returns a TypeError frame.
func errorFrame(id uint64, code uint32, msg string) wire.Frame {
	return wire.Frame{Type: wire.TypeError, ID: id, Payload: wire.AppendError(nil, code, msg)}
}
