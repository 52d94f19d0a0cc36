package nats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/bridge"
	"github.com/wizardmesh/wizard/runtime/internal/streamconn"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// serverStream is the serving side of one stream: the caller's frames
// come on the node's subject with the stream's subject as their reply
// subject, which names the stream; the node's go to that subject.
type serverStream struct {
	st     stream
	l      *Listener
	reply  string // the stream's subject, the caller's
	caller *streamCaller
	open   wire.Frame // the stream-open frame, its strings and meta owned
	remote *runtime.Remote
	ctx    context.Context
	cancel context.CancelCauseFunc // ends ctx; its cause says why (context.Cause)
	stop   func() bool             // stops the watch over ctx

	mu      sync.Mutex
	trailer []wire.Meta
}

var _ streamconn.Stream = (*serverStream)(nil)

// streamCaller is a caller with streams open on a listener, known by its
// reply inbox: when the node last heard from it, whether a ping of it is
// on its way, and its streams. They are under the listener's mu.
type streamCaller struct {
	heard   time.Time
	pinging chan struct{} // while a ping is on its way: its pong's signal (cap 1)
	streams map[*serverStream]struct{}
	grown   atomic.Int64 // what its streams grew their receive windows by
}

// Open returns the stream's open frame: pattern, flags, deadline and
// meta (the caller's headers). The caller must not modify it.
func (ss *serverStream) Open() *wire.Frame { return &ss.open }

// Recv returns the next message from the caller, io.EOF once it has
// closed its side and every message before is taken, and the stream's
// error once it has ended: the handler's ctx's error when its ctx ended
// (a cancel, the deadline, a caller lost or the broker connection lost:
// context.Cause(ctx) says which), or the stream's own end.
func (ss *serverStream) Recv(ctx context.Context) (wire.Codec, []byte, error) {
	return ss.st.recv(ctx)
}

// Send sends one message, waiting for the stream's credit at most until
// ctx ends.
func (ss *serverStream) Send(ctx context.Context, codec wire.Codec, payload []byte) error {
	return ss.st.send(ctx, codec, payload, errSendEnded)
}

// SendHeader sends the node's headers: at most once, before any message.
func (ss *serverStream) SendHeader(meta []wire.Meta) error {
	st := &ss.st
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
	f := wire.Frame{Type: wire.TypeStreamHeader, Meta: meta}
	if size, max := f.Size()-4, st.maxFrame(); size > max {
		return fmt.Errorf("%s: stream header of %d bytes: %w (limit %d)", st.where, size, wire.ErrFrameTooLarge, max)
	}
	st.headed = true
	if err := st.publish(&f); err != nil {
		return bridge.Lost(st.where, err)
	}
	return nil
}

// SetTrailer sets the trailers the stream's end carries (a copy of
// meta); the last call wins.
func (ss *serverStream) SetTrailer(meta []wire.Meta) {
	meta = copyMeta(meta)
	ss.mu.Lock()
	ss.trailer = meta
	ss.mu.Unlock()
}

// Queued returns the payload bytes received and not taken by Recv yet:
// at most the window plus one message.
func (ss *serverStream) Queued() int { return ss.st.queued() }

// Remote returns what the transport knows of the caller, as a call's
// runtime.Message.Remote says it: its reply inbox, and no certificate
// (the broker is the trust boundary).
func (ss *serverStream) Remote() *runtime.Remote { return ss.remote }

// openStream takes a stream-open frame from the caller whose stream
// subject is reply: it refuses the stream at once with a stream-end
// flagged refused when the node serves no streams, is going away, or the
// caller or the listener is at its bound of streams, and otherwise starts
// the handler on a goroutine of its own. A stream takes no part of the caller's share of
// in-flight calls, as over the mux: an idle stream must not shed calls,
// and WithMaxStreams bounds a caller's streams.
func (l *Listener) openStream(reply string, f *wire.Frame) {
	if reply == "" {
		l.log.Warn("wizard: nats: malformed message dropped", "subject", l.subject, "err", "a stream-open frame without a reply subject")
		return
	}
	caller := callerOf(reply)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	if l.streams[reply] != nil {
		l.mu.Unlock()
		l.log.Warn("wizard: nats: malformed message dropped", "subject", l.subject, "remote", reply, "err", "a stream-open frame with the subject of a stream open")
		return
	}
	sc := l.callers[caller]
	var code runtime.Code
	var why string
	switch {
	case l.ss == nil:
		code, why = runtime.CodeUnimplemented, "this server serves no streams"
	case l.draining:
		code, why = runtime.CodeUnavailable, "server is going away"
	case sc != nil && len(sc.streams) >= l.t.maxStreams:
		code, why = runtime.CodeResourceExhausted, "too many streams of this caller"
	case len(l.streams) >= l.t.maxServing:
		// Whoever may publish on the subject can name as many callers as
		// it likes: the listener's own bound holds.
		code, why = runtime.CodeResourceExhausted, "serving too many streams"
	}
	if code != 0 {
		l.mu.Unlock()
		l.publish(reply, &wire.Frame{Type: wire.TypeStreamEnd, Flags: wire.FlagRefused, ID: 1, Payload: wire.AppendError(nil, uint32(code), "wizard: nats: "+l.subject+": "+why)})
		return
	}
	if sc == nil {
		sc = &streamCaller{streams: map[*serverStream]struct{}{}}
		l.callers[caller] = sc
	}
	sc.heard = time.Now()
	ss := newServerStream(l, reply, sc, f)
	sc.streams[ss] = struct{}{}
	l.streams[reply] = ss
	l.wg.Add(1)
	l.mu.Unlock()
	ss.st.openCredit()
	go l.serveStream(ss)
}

// newServerStream makes the node's side of the stream f opens on reply,
// for the caller sc, with its handler's ctx: whole before the listener's
// tables hold it, where other goroutines find it (pings, a lost broker
// connection).
func newServerStream(l *Listener, reply string, sc *streamCaller, f *wire.Frame) *serverStream {
	ss := &serverStream{l: l, reply: reply, caller: sc, remote: runtime.NewRemote("nats", callerOf(reply), nil)}
	ss.st.init(l.b.nc, reply, "", "wizard: nats: "+l.subject, l.b.maxFrame, l.t.streamWindow, l.t.autoWindow, &sc.grown)
	ss.st.seqIn = f.ID
	ss.open = wire.Frame{Type: f.Type, Flags: f.Flags, Deadline: f.Deadline, Pattern: string([]byte(f.Pattern)), Meta: copyMeta(f.Meta)}
	ctx, cancel := context.WithCancelCause(l.ctx)
	if f.Deadline > 0 {
		var cancelDeadline context.CancelFunc
		ctx, cancelDeadline = context.WithDeadline(ctx, time.Now().Add(f.Deadline))
		cancelParent := cancel
		// The parent first, so that its cause reaches the handler's ctx.
		cancel = func(cause error) { cancelParent(cause); cancelDeadline() }
	}
	ss.ctx, ss.cancel = ctx, cancel
	// The deadline (or a cancel) ends the stream's Send and Recv too, for
	// a handler that waits on them with another ctx.
	ss.stop = context.AfterFunc(ctx, func() { ss.st.fail(ctx.Err()) })
	return ss
}

// serveStream runs the stream's handler, ends the stream with what it
// returned and retires it.
func (l *Listener) serveStream(ss *serverStream) {
	defer l.wg.Done()
	err := l.callStream(ss)
	ss.stop()
	ss.cancel(nil)
	st := &ss.st
	st.fail(errSendEnded) // the handler is done: nothing more is taken
	ss.mu.Lock()
	trailer := ss.trailer
	ss.mu.Unlock()
	// The stream no longer counts against the caller's bounds before its
	// end can reach the caller: a caller that opens its next stream on
	// the end finds room.
	l.mu.Lock()
	l.retireLocked(ss)
	closed := l.closed
	l.mu.Unlock()
	if closed {
		st.silence() // the callers were told the node closed
		return
	}
	end := wire.Frame{Type: wire.TypeStreamEnd, Meta: trailer, Payload: endPayload(err)}
	if size, max := end.Size()-4, st.maxFrame(); size > max {
		end = wire.Frame{Type: wire.TypeStreamEnd, Payload: wire.AppendError(nil, uint32(runtime.CodeResourceExhausted), "wizard: nats: "+l.subject+": stream end exceeds the frame limit")}
	}
	st.last(&end) // unless the caller cancelled, and forgot the stream
}

// retireLocked removes ss from the listener's tables; l.mu is held.
func (l *Listener) retireLocked(ss *serverStream) {
	if l.streams[ss.reply] == ss {
		delete(l.streams, ss.reply)
	}
	delete(ss.caller.streams, ss)
	if len(ss.caller.streams) == 0 {
		caller := callerOf(ss.reply)
		if l.callers[caller] == ss.caller {
			delete(l.callers, caller)
		}
	}
}

// callStream runs the node's stream handler, turning a panic into an
// internal error (logged with its stack, never sent).
func (l *Listener) callStream(ss *serverStream) (err error) {
	defer func() {
		if p := recover(); p != nil {
			l.t.log.Error("wizard: nats: stream handler panicked", "pattern", ss.open.Pattern, "panic", p, "stack", string(debug.Stack()))
			err = &streamconn.Error{Code: uint32(runtime.CodeInternal), Message: "wizard: internal error"}
		}
	}()
	return l.ss.ServeStream(ss.ctx, ss)
}

// streamFrame takes a frame of the caller for the stream whose subject
// is reply: data, its close, credit. A frame for a stream the node no
// longer serves is dropped.
func (l *Listener) streamFrame(reply string, f *wire.Frame) {
	l.mu.Lock()
	ss := l.streams[reply]
	if ss != nil {
		ss.caller.heard = time.Now()
	}
	l.mu.Unlock()
	if ss == nil {
		return
	}
	if !ss.st.inOrder(f.ID) {
		ss.abort(errFramesLost)
		return
	}
	switch f.Type {
	case wire.TypeStreamData:
		if !ss.st.deliver(f.Codec, f.Payload) {
			ss.abort(errCreditViolation)
		}
	case wire.TypeStreamClose:
		ss.st.endRecv(io.EOF)
	case wire.TypeStreamCredit:
		if err := ss.st.addCredit(f.Payload); err != nil {
			ss.abort(err)
		}
	}
}

// abort ends the stream with err, which its end tells the caller, as
// HTTP/2 resets a stream: its handler is cancelled. The end goes before
// the handler's ctx ends, so that it is this end the caller gets, not
// the handler's.
func (ss *serverStream) abort(err error) {
	ss.st.fail(err)
	ss.st.last(&wire.Frame{Type: wire.TypeStreamEnd, Payload: endPayload(err)})
	ss.cancel(err)
}

// cancelStream applies the caller's cancel of the stream whose subject
// is reply: its handler's ctx ends, and nothing more is sent on it (the
// caller forgot it). It reports whether reply named a stream.
func (l *Listener) cancelStream(reply string) bool {
	l.mu.Lock()
	ss := l.streams[reply]
	l.mu.Unlock()
	if ss == nil {
		return false
	}
	ss.st.silence()
	ss.cancel(context.Canceled) // first: a handler woken by the failed Recv finds its ctx ended
	ss.st.fail(context.Canceled)
	return true
}

// heardLocked records that the caller whose reply subject is reply was
// heard from (a ping, or a pong: pong is set); l.mu is held.
func (l *Listener) heardLocked(reply string, pong bool) {
	if len(l.callers) == 0 {
		return
	}
	if sc := l.callers[callerOf(reply)]; sc != nil {
		sc.heard = time.Now()
		if pong && sc.pinging != nil {
			signal(sc.pinging)
		}
	}
}

// loseStreams ends streams as lost with err: their peer is gone, and
// nothing more is sent on them. Their handlers' ctx ends with err as its
// cause.
func loseStreams(streams []*serverStream, err error) {
	for _, ss := range streams {
		ss.st.silence()
		ss.cancel(err) // first, as in cancelStream: context.Cause(ctx) is err
		ss.st.fail(err)
	}
}

// watchCallers pings the callers with streams open that the node has
// not heard from for the stream keep-alive interval (see
// [WithStreamKeepAlive]), and ends the streams of those that do not
// answer in time: NATS has no connection between the node and a caller
// whose end would tell. It runs until the listener closes.
func (l *Listener) watchCallers() {
	tick := time.NewTicker(max(l.t.streamKeepAlive/4, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		l.mu.Lock()
		for caller, sc := range l.callers {
			if sc.pinging != nil || now.Sub(sc.heard) < l.t.streamKeepAlive {
				continue
			}
			for ss := range sc.streams {
				sc.pinging = make(chan struct{}, 1)
				go l.pingCaller(caller, sc, sc.pinging, ss.reply)
				break
			}
		}
		l.mu.Unlock()
	}
}

// pingCaller pings the caller sc on subject, one of its streams', and
// ends its streams as lost unless it answers within the stream
// keep-alive timeout. The ping names the node's subject, to which the
// caller answers (see broker.pong); its reply subject, the node's inbox,
// gets the broker's word that no one listens on the caller's inbox, if
// the caller is gone.
func (l *Listener) pingCaller(caller string, sc *streamCaller, pong chan struct{}, subject string) {
	b := l.b
	p := &pending{ch: make(chan answer, 1)}
	id, reply := b.register(p)
	err := b.nc.PublishRequest(subject, reply, encodeFrame(&wire.Frame{Type: wire.TypePing, Pattern: l.subject}))
	if err == nil {
		timer := time.NewTimer(l.t.streamKeepAliveTimeout)
		select {
		case <-pong:
		case a := <-p.ch:
			err = a.err
			if err == nil {
				err = errors.New("the caller answered a ping on the node's inbox")
			}
		case <-timer.C:
			err = fmt.Errorf("the caller did not answer a ping within %v", l.t.streamKeepAliveTimeout)
		case <-l.ctx.Done():
			err = l.ctx.Err()
		}
		timer.Stop()
	}
	b.unregister(id) // an answer coming meanwhile goes to p.ch, unread
	if errors.Is(err, errNoResponders) {
		err = errors.New("the caller is gone: no one listens on its inbox")
	}
	var lost []*serverStream
	l.mu.Lock()
	sc.pinging = nil
	if err == nil {
		sc.heard = time.Now()
	} else if l.callers[caller] == sc {
		for ss := range sc.streams {
			lost = append(lost, ss)
		}
	}
	l.mu.Unlock()
	if len(lost) > 0 {
		l.log.Warn("wizard: nats: a caller with streams open is lost", "subject", l.subject, "remote", caller, "err", err)
		loseStreams(lost, bridge.Lost("wizard: nats: "+l.subject, err))
	}
}
