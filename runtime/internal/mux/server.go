package mux

import (
	"bufio"
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
	codeResourceExhausted = 8
	codeInternal          = 13
)

// server is the serving side of one connection.
type server struct {
	c    *conn
	h    Handler
	base context.Context // Serve's ctx, for its values only (a request's end is its own)

	// Guarded by c.mu.
	inflight map[uint64]*request
	maxID    uint64 // the highest request id taken
	lastID   uint64 // with draining: the highest id the goaway promised to serve
	draining bool
	closed   bool
	idle     chan struct{} // closed when draining and nothing is in flight

	handlers sync.WaitGroup

	// Workers serve requests one after another, so that a stack grown by
	// one request serves the next ones too (a fresh goroutine per request
	// spent most of the server's CPU growing stacks). Idle workers wait on
	// a stack, guarded by c.mu: the one that finished last takes the next
	// request (its stack is the warmest), and handing it over is one
	// receive on its own channel — no select over shared channels, no
	// timer per request. A worker idle for a whole workerIdle period
	// leaves at the next reap; all leave when Serve returns.
	idleWorkers []*worker
	gen         uint64      // reap periods so far
	reaper      *time.Timer // armed while workers are idle
	reaping     bool
	stopped     bool // no handler runs any more: a late reap does nothing
}

// worker is one serving goroutine's handle.
type worker struct {
	next chan *request // capacity 1, so handing over never waits; nil: leave
	gen  uint64        // s.gen when it went idle
}

// workerIdle is how long, at least, an idle worker waits for another
// request (at most twice as long).
const workerIdle = time.Second

// takeWorker pops the idle worker that finished last, or returns nil.
// Callers hold c.mu.
func (s *server) takeWorker() *worker {
	n := len(s.idleWorkers)
	if n == 0 {
		return nil
	}
	w := s.idleWorkers[n-1]
	s.idleWorkers[n-1] = nil
	s.idleWorkers = s.idleWorkers[:n-1]
	return w
}

// start serves r on w, or on a new worker when w is nil.
func (s *server) start(r *request, w *worker) {
	if w != nil {
		w.next <- r
		return
	}
	go s.work(r)
}

// work serves r, then the requests handed to it, until it is told to
// leave.
func (s *server) work(r *request) {
	w := &worker{next: make(chan *request, 1)}
	for r != nil {
		r.serve(w)
		r = <-w.next
	}
}

// parkWorker puts w on the idle stack. Callers hold c.mu. Serve sends the
// idle workers away only after every handler has returned, so every
// worker is parked by then.
func (s *server) parkWorker(w *worker) {
	w.gen = s.gen
	s.idleWorkers = append(s.idleWorkers, w)
	if !s.reaping {
		s.reaping = true
		if s.reaper == nil {
			s.reaper = time.AfterFunc(workerIdle, s.reap)
		} else {
			s.reaper.Reset(workerIdle)
		}
	}
}

// reap sends away the workers idle since before the last reap (they sit
// at the bottom of the stack) and re-arms while workers remain idle.
func (s *server) reap() {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.stopped {
		return
	}
	i := 0
	for i < len(s.idleWorkers) && s.idleWorkers[i].gen < s.gen {
		s.idleWorkers[i].next <- nil
		i++
	}
	s.idleWorkers = append(s.idleWorkers[:0], s.idleWorkers[i:]...)
	clear(s.idleWorkers[len(s.idleWorkers):cap(s.idleWorkers)])
	s.gen++
	if s.reaping = len(s.idleWorkers) > 0; s.reaping {
		s.reaper.Reset(workerIdle)
	}
}

// stopWorkers sends every worker away (all are idle: Serve calls it once
// no handler runs) and stops the reaper.
func (s *server) stopWorkers() {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	s.stopped = true
	for _, w := range s.idleWorkers {
		w.next <- nil
	}
	s.idleWorkers = nil
	if s.reaper != nil {
		s.reaper.Stop()
	}
}

// Serve runs the server side of a connection over rw: it reads the
// client's handshake, answers with its own, and serves requests, each in
// its own goroutine, until the stream fails or ctx is done.
//
// When ctx is done Serve shuts down gracefully: it sends a goaway naming
// the highest request id it has taken (the client fails later calls with
// [ErrGoingAway]), waits for the handlers in flight for at most the drain
// timeout, flushes their answers and closes the connection.
//
// Serve closes rw before it returns, after every handler it started has
// returned (handlers still running when the connection ends are
// cancelled). It returns nil after a graceful shutdown or when the client
// closed the connection between frames; otherwise an error saying why the
// connection was closed: a malformed or oversized frame
// ([wire.ErrMalformed], [wire.ErrFrameTooLarge]), a bad handshake
// ([wire.ErrBadMagic], a *wire.VersionError), [ErrKeepAliveTimeout],
// [ErrProtocol], or the stream's error.
func Serve(ctx context.Context, rw io.ReadWriteCloser, h Handler, opts Options) error {
	opts, err := opts.normalize()
	if err != nil {
		rw.Close()
		return err
	}
	br := bufio.NewReaderSize(rw, bufferSize)
	err = handshake(ctx, rw, opts.HandshakeTimeout, func() error {
		err := wire.ReadHandshake(br)
		var ve *wire.VersionError
		if err == nil || errors.As(err, &ve) {
			// Answer a client of another version too, so that it can
			// say which versions disagree.
			if werr := wire.WriteHandshake(rw); err == nil {
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
		idle:     make(chan struct{}),
	}
	c := s.c
	c.start(func() { c.fail(c.readFrames(s.dispatch)) })
	select {
	case <-ctx.Done():
		s.shutdown()
	case <-c.done:
	}
	c.wg.Wait()
	c.drainQueue()

	// Cancel the handlers that are still running and wait for them. A
	// handler of a call the client may send again on another connection
	// (wire.FlagKeep) runs on to its deadline, unless the server is
	// shutting down: the call sent again joins it.
	reason := c.reason()
	shutdown := reason == errShutdown || ctx.Err() != nil
	c.mu.Lock()
	s.closed = true
	running := make([]*request, 0, len(s.inflight))
	for _, r := range s.inflight {
		running = append(running, r)
	}
	c.mu.Unlock()
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
	if len(s.inflight) == 0 {
		close(s.idle)
	}
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
	select {
	case c.wake <- struct{}{}:
	default:
	}
	select {
	case <-c.writerDone:
		c.linger(t.C)
		c.fail(errShutdown)
	case <-t.C:
		c.fail(errDrainTimeout)
	case <-c.done:
	}
}

// linger runs once every answer is written, on a stream that can close
// its sending side alone (TCP, TLS): it does, and waits until the client
// closes its side or timeout fires, reading on and dropping what still
// comes. Closing outright would answer the client's requests that cross
// the goaway with a reset, and a reset makes the client's kernel drop the
// answers it has not read yet — answers to calls that ran.
func (c *conn) linger(timeout <-chan time.Time) {
	cw, ok := c.rw.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	select {
	case <-c.done: // the reader saw the client close
	case <-timeout:
	}
}

// dispatch handles one frame from the client.
func (s *server) dispatch(f *wire.Frame) error {
	c := s.c
	switch f.Type {
	case wire.TypeRequest:
		r := &request{frame: *f, s: s}
		if f.Deadline > 0 {
			r.deadline = time.Now().Add(f.Deadline)
		}
		c.mu.Lock()
		if s.closed || (s.draining && f.ID > s.lastID) {
			c.mu.Unlock() // refused: the client fails it on the goaway
			return nil
		}
		if _, dup := s.inflight[f.ID]; dup {
			c.mu.Unlock()
			return protocolError("duplicate request id %d", f.ID)
		}
		s.inflight[f.ID] = r
		s.maxID = max(s.maxID, f.ID)
		s.handlers.Add(1)
		w := s.takeWorker()
		c.mu.Unlock()
		s.start(r, w)
	case wire.TypeCancel:
		c.mu.Lock()
		r := s.inflight[f.ID]
		c.mu.Unlock()
		if r != nil {
			r.cancel(context.Canceled)
		}
	case wire.TypePing:
		c.pushControl(wire.TypePong, f.ID)
	case wire.TypePong:
		c.pong(f.ID)
	case wire.TypeGoAway:
		// The client is leaving; it closes the connection when done.
	default:
		return protocolError("client sent a %v frame", f.Type)
	}
	return nil
}

// serve runs the handler for r on worker w, queues its answer, retires r
// and parks w.
func (r *request) serve(w *worker) {
	s := r.s
	c := s.c
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

	locked := false
	if buf != nil {
		if c.lockSpace(context.Background()) == nil {
			c.pushLocked(outFrame{buf: buf})
			locked = true
		} else {
			putBuffer(buf) // the connection has ended: nobody to answer
		}
	}
	if !locked {
		c.mu.Lock()
	}
	delete(s.inflight, id)
	if s.draining && len(s.inflight) == 0 && !s.closed {
		select {
		case <-s.idle:
		default:
			close(s.idle)
		}
	}
	s.parkWorker(w)
	c.mu.Unlock()
	s.handlers.Done()
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
