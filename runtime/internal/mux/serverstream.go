package mux

import (
	"context"
	"errors"
	"io"
	"runtime/debug"
	"sync"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// StreamHandler serves one stream, on a goroutine of its own. It returns
// the stream's end: nil for OK, a [*StreamError] for a code of its own,
// ctx's error (canceled, deadline_exceeded), or any other error (unknown,
// with the error's message); the trailers are what it set with
// [ServerStream.SetTrailer]. ctx carries the stream's deadline and ends
// when the client cancels, when the deadline passes, when the connection
// is lost and when the handler returns; its values are those of the ctx
// given to [Serve].
type StreamHandler func(ctx context.Context, st *ServerStream) error

// ServerStream is the serving side of one stream. Send and SendHeader may
// be called by one goroutine while another calls Recv.
type ServerStream struct {
	st     *stream
	s      *server
	open   wire.Frame // the stream-open frame, its strings and meta owned
	ctx    context.Context
	cancel context.CancelFunc
	stop   func() bool // stops the watch over ctx

	mu      sync.Mutex
	trailer []wire.Meta
}

// Open returns the stream's open frame: its pattern, flags, deadline and
// meta (the client's headers). The caller must not modify it.
func (ss *ServerStream) Open() *wire.Frame { return &ss.open }

// Recv returns the next message from the client, waiting at most until
// ctx ends: its codec and payload, which the caller owns. It returns
// [io.EOF] once the client has closed its side (CloseSend) and every
// message before is taken, and the stream's error once it has ended (the
// handler's ctx's error for a cancel or the deadline, a [*CallError] for
// the connection's loss).
func (ss *ServerStream) Recv(ctx context.Context) (wire.Codec, []byte, error) {
	return ss.st.recv(ctx)
}

// Send sends one message, waiting for the stream's credit at most until
// ctx ends (the message is then not sent, and the stream goes on). It
// returns the stream's error once the stream has ended.
func (ss *ServerStream) Send(ctx context.Context, codec wire.Codec, payload []byte) error {
	return ss.st.send(ctx, codec, payload, errSendEnded)
}

// SendBody is Send for a message that body encodes straight into its
// frame, before SendBody returns.
func (ss *ServerStream) SendBody(ctx context.Context, codec wire.Codec, body wire.Body) error {
	return ss.st.sendFrame(ctx, wire.Frame{Type: wire.TypeStreamData, Codec: codec, ID: ss.st.id, Body: body}, errSendEnded)
}

// errHeaderLate is the error of a SendHeader after a message or a first
// SendHeader.
var errHeaderLate = errors.New("wizard: mux: stream header after the header or a message")

// SendHeader sends the server's headers: at most once, before any
// message.
func (ss *ServerStream) SendHeader(meta []wire.Meta) error {
	st := ss.st
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case st.abort != nil:
		return st.abort
	case st.sendEnd:
		return errSendEnded
	case st.headed:
		return errHeaderLate
	}
	st.headed = true
	ss.s.c.pushFrame(&wire.Frame{Type: wire.TypeStreamHeader, ID: st.id, Meta: meta})
	return nil
}

// SetTrailer sets the trailers the stream's end carries (a copy of
// meta); the last call wins.
func (ss *ServerStream) SetTrailer(meta []wire.Meta) {
	meta = copyMeta(meta)
	ss.mu.Lock()
	ss.trailer = meta
	ss.mu.Unlock()
}

// Queued returns the payload bytes received and not taken by Recv yet:
// at most the stream's window plus one message.
func (ss *ServerStream) Queued() int { return ss.st.queued() }

// openStream takes a stream-open frame from the client: it refuses the
// stream at once with a stream-end (flagged wire.FlagRefused) when the
// server has no stream handler or is at MaxStreams, and otherwise starts
// the handler on a goroutine of its own. A stream takes no part of the
// caller's share of in-flight calls: an idle stream must not shed calls,
// and MaxStreams bounds a connection's streams.
func (s *server) openStream(f *wire.Frame) error {
	c := s.c
	c.mu.Lock()
	if s.closed || (s.draining && f.ID > s.lastID) {
		c.mu.Unlock() // refused: the client fails it on the goaway
		return nil
	}
	if _, dup := s.inflight[f.ID]; dup {
		c.mu.Unlock()
		return protocolError("duplicate request id %d", f.ID)
	}
	if _, dup := s.streams[f.ID]; dup {
		c.mu.Unlock()
		return protocolError("duplicate stream id %d", f.ID)
	}
	var code uint32
	var msg string
	switch {
	case c.opts.ServeStream == nil:
		code, msg = codeUnimplemented, "wizard: this server serves no streams"
	case s.nstreams >= c.opts.MaxStreams:
		code, msg = codeResourceExhausted, "wizard: too many streams on this connection"
	}
	if code != 0 {
		c.mu.Unlock()
		c.pushFrame(&wire.Frame{Type: wire.TypeStreamEnd, Flags: wire.FlagRefused, ID: f.ID, Payload: wire.AppendError(nil, code, msg)})
		return s.waitRoom()
	}
	ss := &ServerStream{st: newStream(c, f.ID), s: s}
	ss.open = wire.Frame{Type: f.Type, Flags: f.Flags, ID: f.ID, Deadline: f.Deadline, Pattern: string([]byte(f.Pattern)), Meta: copyMeta(f.Meta)}
	s.streams[f.ID] = ss
	s.nstreams++
	s.maxID = max(s.maxID, f.ID)
	s.handlers.Add(1)
	c.mu.Unlock()

	ctx, cancel := context.WithCancel(context.WithoutCancel(s.base))
	if f.Deadline > 0 {
		var cancelDeadline context.CancelFunc
		ctx, cancelDeadline = context.WithDeadline(ctx, time.Now().Add(f.Deadline))
		cancelParent := cancel
		cancel = func() { cancelDeadline(); cancelParent() }
	}
	ss.ctx, ss.cancel = ctx, cancel
	// The deadline (or a cancel) ends the stream's Send and Recv too, for
	// a handler that waits on them with another ctx.
	ss.stop = context.AfterFunc(ctx, func() { ss.st.fail(ctx.Err()) })
	if credit := ss.st.openCredit(); credit != nil {
		c.push(credit)
	}
	go s.serveStream(ss)
	return nil
}

// serveStream runs the stream's handler, ends the stream with what it
// returned and retires it.
func (s *server) serveStream(ss *ServerStream) {
	err := s.callStream(ss)
	ss.stop()
	ss.cancel()
	st := ss.st
	st.fail(errSendEnded) // the handler is done: nothing more is taken
	ss.mu.Lock()
	trailer := ss.trailer
	ss.mu.Unlock()
	// The stream no longer counts against MaxStreams before its end can
	// reach the client: a client that opens its next stream on the end
	// finds room.
	c := s.c
	c.mu.Lock()
	s.nstreams--
	c.mu.Unlock()
	end := wire.Frame{Type: wire.TypeStreamEnd, ID: st.id, Meta: trailer, Payload: endPayload(err)}
	if size := end.Size(); size-4 > s.c.opts.MaxFrameSize {
		end = wire.Frame{Type: wire.TypeStreamEnd, ID: st.id, Payload: wire.AppendError(nil, codeResourceExhausted, "wizard: stream end exceeds the frame limit")}
	}
	st.mu.Lock()
	if !st.sendEnd { // not cancelled by the client, which forgot the stream
		st.sendEnd = true
		s.c.pushFrame(&end)
	}
	st.mu.Unlock()

	c.mu.Lock()
	delete(s.streams, st.id)
	s.idleCheckLocked()
	c.mu.Unlock()
	s.handlers.Done()
}

// callStream runs the stream handler, turning a panic into an internal
// error (logged with its stack, never sent).
func (s *server) callStream(ss *ServerStream) (err error) {
	defer func() {
		if p := recover(); p != nil {
			s.c.log.Error("wizard: stream handler panicked", "pattern", ss.open.Pattern, "panic", p, "stack", string(debug.Stack()))
			err = &StreamError{Code: codeInternal, Message: "wizard: internal error"}
		}
	}()
	return s.c.opts.ServeStream(ss.ctx, ss)
}

// dispatchStream handles a stream frame from the client, read into r. A
// frame for a stream the server no longer serves is dropped.
func (s *server) dispatchStream(r *request) error {
	f := &r.frame
	if f.Type == wire.TypeStreamOpen {
		return s.openStream(f)
	}
	var credit uint32
	if f.Type == wire.TypeStreamCredit {
		n, err := wire.DecodeCredit(f.Payload)
		if err != nil {
			return err
		}
		credit = n
	}
	c := s.c
	c.mu.Lock()
	ss := s.streams[f.ID]
	c.mu.Unlock()
	if ss == nil {
		return nil
	}
	switch f.Type {
	case wire.TypeStreamData:
		payload := f.Payload
		if inArray(payload, r.buf.body[:]) { // the reader's, reused: copy
			payload = append([]byte(nil), payload...)
		}
		if !ss.st.deliver(f.Codec, payload) {
			// Ends the stream as HTTP/2 resets one on a flow control
			// error: its handler is cancelled, its end says why.
			// The end goes before the handler's ctx ends, so that it is
			// this end the client gets, not the handler's.
			err := &StreamError{Code: codeResourceExhausted, Message: errCreditViolation}
			st := ss.st
			st.fail(err)
			st.mu.Lock()
			if !st.sendEnd {
				st.sendEnd = true
				c.pushFrame(&wire.Frame{Type: wire.TypeStreamEnd, ID: st.id, Payload: endPayload(err)})
			}
			st.mu.Unlock()
			ss.cancel()
		}
	case wire.TypeStreamClose:
		ss.st.endRecv(io.EOF)
	case wire.TypeStreamCredit:
		ss.st.addCredit(credit)
	}
	return nil
}

// cancelStream applies the client's cancel of a stream: its handler's ctx
// ends, and nothing more is sent on it (the client forgot it). It reports
// whether id was a stream.
func (s *server) cancelStream(id uint64) bool {
	c := s.c
	c.mu.Lock()
	ss := s.streams[id]
	c.mu.Unlock()
	if ss == nil {
		return false
	}
	st := ss.st
	st.mu.Lock()
	st.sendEnd = true
	st.mu.Unlock()
	ss.cancel() // first: a handler woken by the failed Recv finds its ctx ended
	st.fail(context.Canceled)
	return true
}

// failStreams ends the open streams once the connection has ended: their
// Send and Recv fail with err, their handlers' ctx ends.
func (s *server) failStreams(err error) {
	c := s.c
	c.mu.Lock()
	streams := make([]*ServerStream, 0, len(s.streams))
	for _, ss := range s.streams {
		streams = append(streams, ss)
	}
	c.mu.Unlock()
	for _, ss := range streams {
		// The stream ctx's AfterFunc would fail the stream with the ctx's
		// error (context.Canceled) on a goroutine of its own, racing the
		// connection's err: stop it first, so Send and Recv report err.
		ss.stop()
		ss.cancel() // before fail, as in cancelStream
		ss.st.fail(err)
	}
}

// idleCheckLocked closes idle when the server is draining and nothing is
// in flight any more, neither request nor stream; c.mu is held.
func (s *server) idleCheckLocked() {
	if s.draining && len(s.inflight) == 0 && len(s.streams) == 0 && !s.closed {
		select {
		case <-s.idle:
		default:
			close(s.idle)
		}
	}
}
