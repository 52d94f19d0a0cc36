package mux

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// request is a request being served, and the context its handler gets.
// One allocation holds both: the context is this package's own rather
// than context.WithDeadline's, so that a request costs no timer and no
// channel unless its handler asks for Done.
//
// The context ends with the request's deadline (context.DeadlineExceeded),
// or with context.Canceled on the caller's cancel, the loss of the
// connection or the handler's return. It implements AfterFunc, so that
// contexts derived from it (context.WithTimeout and the like) need no
// goroutine of their own.
type request struct {
	frame        wire.Frame
	s            *server
	deadline     time.Time // zero: none (yet, with serveTimeout)
	at           time.Time // when it was read (see server.arrival)
	serveTimeout bool      // no deadline came: the server's ServeTimeout applies
	inline       bool      // served by the reader (see inline.go); guarded by s.c.mu
	timed        bool      // served inline, its handler's time counted (see server.observe)

	mu    sync.Mutex
	err   error
	done  chan struct{} // made on demand
	timer *time.Timer   // made with done, when there is a deadline
	after []*afterFunc

	// buf is the room for a small frame's body and metadata, read into
	// by the reader (see readRequests): the request's own, in its
	// allocation, or its room's (see Options.Room and Options.Done).
	buf *requestBuf

	// room is the handler's own part of the record (see Options.Room),
	// nil when it has none.
	room any
}

// requestBuf is room for a small frame's body and metadata: a request
// with a small body costs no allocation of its own for them.
type requestBuf struct {
	body [requestBody]byte
	meta [requestMeta]wire.Meta
}

// Request is a request's record, for [Options.Room]: a handler's package
// makes it a field of a struct of its own, so that what it keeps for the
// request shares the record's allocation. Only the mux fills it in.
type Request = request

// RequestBuf is the room a request's frame is read into, for
// [Options.Room]; only the mux writes it.
type RequestBuf = requestBuf

// ownRequest is a request and its buffer in one allocation, for a
// server without Room.
type ownRequest struct {
	request
	buf requestBuf
}

// RoomOf returns the room the record of the request whose context is ctx
// was made with (see [Options.Room]), or nil: a handler given another
// context, or by a server without Room, gets nil and makes its own.
func RoomOf(ctx context.Context) any {
	if r, ok := ctx.(*request); ok {
		return r.room
	}
	return nil
}

// requestBody and requestMeta are the body size and metadata count a
// request holds without allocating: a unary call of the runtime's carries
// four metadata pairs (the caller, its token, the call id, the message
// type) in a body of about 140 bytes.
const (
	requestBody = 160
	requestMeta = 4
)

// newRequest returns a request for the reader to read a frame into.
func (s *server) newRequest() *request {
	var r *request
	if room := s.c.opts.Room; room != nil {
		var b *requestBuf
		var x any
		r, b, x = room()
		r.buf, r.room = b, x
	} else {
		x := new(ownRequest)
		r = &x.request
		r.buf = &x.buf
	}
	r.s = s
	r.frame.Meta = r.buf.meta[:0]
	return r
}

type afterFunc struct{ f func() }

var _ context.Context = (*request)(nil)

// Deadline returns the request's deadline: the caller's, or the server's
// ServeTimeout.
func (r *request) Deadline() (time.Time, bool) {
	if !r.serveTimeout {
		return r.deadline, !r.deadline.IsZero()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deadlineLocked(), true
}

// deadlineLocked returns r's deadline; for a request that came without
// one it is ServeTimeout from the first time the handler looks (the
// runtime's handlers do at once). r.mu is held.
func (r *request) deadlineLocked() time.Time {
	if r.serveTimeout && r.deadline.IsZero() {
		r.deadline = time.Now().Add(r.s.c.opts.ServeTimeout)
	}
	return r.deadline
}

// Value returns the value of the ctx given to Serve.
func (r *request) Value(key any) any { return r.s.base.Value(key) }

// Done returns a channel closed when the request's context ends.
func (r *request) Done() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armLocked()
	return r.done
}

// Err returns nil until the context ends, then why.
func (r *request) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if dl := r.deadlineLocked(); r.err == nil && !dl.IsZero() && !time.Now().Before(dl) {
		r.cancelLocked(context.DeadlineExceeded)
	}
	return r.err
}

// AfterFunc arranges to call f in its own goroutine once the context
// ends, as context.AfterFunc does; stop undoes that if f has not started.
func (r *request) AfterFunc(f func()) (stop func() bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armLocked()
	if r.err != nil {
		go f()
		return func() bool { return false }
	}
	a := &afterFunc{f: f}
	r.after = append(r.after, a)
	return func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		i := slices.Index(r.after, a)
		if i < 0 {
			return false
		}
		r.after = slices.Delete(r.after, i, i+1)
		return true
	}
}

// armLocked makes the done channel and, for a deadline, the timer that
// ends the context with it.
func (r *request) armLocked() {
	if r.done != nil {
		return
	}
	r.done = make(chan struct{})
	switch {
	case r.err != nil:
		close(r.done)
	case !r.deadlineLocked().IsZero():
		d := time.Until(r.deadline)
		if d <= 0 {
			r.cancelLocked(context.DeadlineExceeded)
			return
		}
		r.timer = time.AfterFunc(d, func() { r.cancel(context.DeadlineExceeded) })
	}
}

// cancel ends the context with err, unless it has ended already.
func (r *request) cancel(err error) {
	r.mu.Lock()
	r.cancelLocked(err)
	r.mu.Unlock()
}

func (r *request) cancelLocked(err error) {
	if r.err != nil {
		return
	}
	r.err = err
	if r.done != nil {
		close(r.done)
	}
	if r.timer != nil {
		r.timer.Stop()
	}
	for _, a := range r.after {
		go a.f()
	}
	r.after = nil
}
