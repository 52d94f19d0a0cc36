package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/wizardmesh/wizard/gateway/auth"
	"github.com/wizardmesh/wizard/runtime"
)

// wsStreamInbound bounds the client's messages a stream holds before the
// service takes them: a reader that finds it full waits (the client's
// frames then wait in its socket), so a fast client is slowed by a slow
// service as a slow client slows the service.
const wsStreamInbound = 4

// wsStreamAheadBytes bounds the bytes of a stream's msg frames queued
// and not yet written (at least one frame, whatever its size): while its
// frames are under it, the relay receives the service's next message
// instead of waiting for the last one's write, so that a writer that
// finds several frames waiting writes them with one system call.
const wsStreamAheadBytes = 16 << 10

// aheadFrames is the most msg frames a stream may have queued and not
// yet written: the connection's streams together fill at most half its
// send queue, so that they alone never make it a slow consumer (4008).
func (ws wsSettings) aheadFrames() int {
	return max(1, ws.sendQueue/(2*max(ws.maxStreams, 1)))
}

// wsStream is a stream open on a WebSocket connection: a goroutine
// relays the service's messages to the client (see [wsConn.stream]),
// and for client and bidi streams another relays the client's msg
// frames, which the reader hands over through in, to the service.
type wsStream struct {
	kind    streamKind
	in      chan json.RawMessage // the client's messages; closed by its end frame (the reader's alone)
	ended   chan struct{}        // closed when the service's side is done: the reader stops waiting on in
	written chan struct{}        // told when one of the stream's frames is written, in queue order; room for all it may have queued
	cancel  context.CancelFunc   // the request's

	halfClosed bool      // the client's end frame came (the reader's alone)
	failure    *apiError // a frame of the client's that ends the stream (400), under the connection's mu
}

func newWSStream(kind streamKind, cancel context.CancelFunc, ahead int) *wsStream {
	st := &wsStream{kind: kind, ended: make(chan struct{}), written: make(chan struct{}, max(ahead, 1)), cancel: cancel}
	if kind != streamServer {
		st.in = make(chan json.RawMessage, wsStreamInbound)
	}
	return st
}

// stream serves a req frame of a streaming route: it opens the mesh
// stream, relays its messages to the client as msg frames (a few queued
// ahead of the socket at most, see [wsStreamAheadBytes]), and ends with
// the end frame, queued after them; the client's messages go the other way on a
// goroutine of their own. A cancel frame, the connection's close and
// the service's end all end it.
//
// A stream refused over the limit has st nil and refused its error.
func (wc *wsConn) stream(ctx context.Context, f inFrame, rt wsRoute, caller *auth.Identity, st *wsStream, refused *apiError) {
	id := *f.ID
	rid := newRequestID()
	start := time.Now()
	a := access{rid: rid}
	if caller != nil {
		a.subject = caller.Subject
	}
	e := refused
	var md runtime.Metadata
	if st == nil {
		a.route = rt.m.policy.name
	} else {
		e, md = wc.relay(ctx, f, rt, caller, rid, st, &a)
		st.cancel()
		close(st.ended)
		wc.mu.Lock()
		if st.failure != nil {
			e = st.failure
		}
		delete(wc.streams, id)
		wc.mu.Unlock()
	}
	a.status = http.StatusOK
	if e != nil {
		a.status = e.status
	}
	wc.g.logFrame(f, wc.ip, &a, time.Since(start))
	write := wc.queue(appendEnd(nil, frameEnd, f.ID, rid, e, md))
	wc.done(id)
	wc.countLimited(e)
	if write {
		wc.writeQueued()
	}
}

// relay opens the stream and relays its messages until it ends: the
// status it ended with (nil: OK) and the service's trailers.
func (wc *wsConn) relay(ctx context.Context, f inFrame, rt wsRoute, caller *auth.Identity, rid string, st *wsStream, a *access) (*apiError, runtime.Metadata) {
	g := wc.g
	c, e := wc.callOf(f, rt, caller, rid, a)
	if e != nil {
		return e, runtime.Metadata{}
	}
	s, sctx, cancel, e := g.openStream(ctx, c, st.kind == streamServer || c.body != nil)
	if e != nil {
		return e, runtime.Metadata{}
	}
	defer s.Close()
	if st.in != nil {
		pumped := make(chan struct{})
		go func() {
			defer close(pumped)
			if e := pump(sctx, s, st.in); e != nil {
				wc.fail(st, e)
			}
		}()
		defer func() { <-pumped }() // after cancel, below
	}
	defer cancel()
	closed := func() (*apiError, runtime.Metadata) {
		// The connection is closing: nobody reads the end.
		return newAPIError(StatusClientClosed, runtime.CodeCanceled, "the client closed the connection"), runtime.Metadata{}
	}
	// The sizes of the stream's frames queued and not yet written,
	// oldest first (the writer tells written in that order).
	var (
		ahead      []int
		head       int
		aheadBytes int
		maxAhead   = cap(st.written)
	)
	for {
		body, err := g.recvJSON(s, &c)
		if err != nil {
			return g.endOf(ctx, sctx, err, &c), s.Trailer()
		}
		b := appendMsg(nil, f.ID, body)
		// Count the frames written meanwhile; wait while this one would
		// pass the bounds.
	count:
		for head < len(ahead) {
			if len(ahead)-head < maxAhead && aheadBytes+len(b) <= wsStreamAheadBytes {
				select {
				case <-st.written:
				default:
					break count
				}
			} else {
				select {
				case <-st.written:
				case <-wc.ctx.Done():
					return closed()
				}
			}
			aheadBytes -= ahead[head]
			if head++; head == len(ahead) {
				ahead, head = ahead[:0], 0
			}
		}
		if !wc.sendAhead(b, st.written) {
			return closed()
		}
		ahead = append(ahead, len(b))
		aheadBytes += len(b)
	}
}

// pump sends the client's messages to the service until the client's
// end frame (then it half-closes the stream) or the stream's end (the
// relay's Recv says how); a message the mesh does not carry ends the
// stream with its error.
func pump(ctx context.Context, s meshStream, in <-chan json.RawMessage) *apiError {
	for {
		select {
		case body, ok := <-in:
			if !ok {
				_ = s.CloseSend()
				return nil
			}
			if err := s.Send(body); err != nil {
				return sendError(err)
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// sendAhead queues a stream's frame, to be told on written once it is
// written; when no writer is at work it starts one on a goroutine of its
// own, so that the relay receives the next message meanwhile. It
// reports false when the connection is closing (a full send queue closes
// it: a slow consumer).
func (wc *wsConn) sendAhead(b []byte, written chan struct{}) bool {
	if wc.closed.Load() {
		return false
	}
	ok, write := wc.send.push(outMsg{b: b, written: written})
	if !ok {
		wc.g.log.Warn("gateway: websocket slow consumer: the send queue is full, closing", "remote", wc.ip, "queue", wc.send.max)
		wc.closeWith(closeSlowConsumer, "slow consumer")
		return false
	}
	if write {
		wc.startWriter()
	}
	return true
}

// streamMsg hands a msg frame's body to its stream, waiting while the
// stream holds wsStreamInbound messages the service has not taken. A
// msg frame for a server stream or after the client's end frame ends
// the stream (400); one for no open stream is answered 400.
func (wc *wsConn) streamMsg(f inFrame) {
	st, e := wc.clientSide(*f.ID, "msg")
	if st == nil {
		if e != nil {
			wc.enqueue(resFrame(f.ID, "", nil, e))
		}
		return
	}
	if e := checkMessage(f.Body); e != nil {
		wc.fail(st, e)
		return
	}
	select {
	case st.in <- f.Body:
	case <-st.ended:
	}
}

// streamEnd half-closes a stream for the client: the service's Recv
// then reports io.EOF once it has the messages sent before.
func (wc *wsConn) streamEnd(id string) {
	st, e := wc.clientSide(id, "end")
	if st == nil {
		if e != nil {
			wc.enqueue(resFrame(&id, "", nil, e))
		}
		return
	}
	st.halfClosed = true
	close(st.in)
}

// clientSide returns the stream id names for a client's msg or end
// frame, or nil and the error to answer (nil: none, the stream has
// been failed).
func (wc *wsConn) clientSide(id, typ string) (*wsStream, *apiError) {
	st, open := wc.streamOf(id)
	if !open {
		return nil, nil // the connection is closing
	}
	var e *apiError
	switch {
	case st == nil:
		return nil, badRequest("no stream " + id + " is open on this connection for a " + typ + " frame")
	case st.kind == streamServer:
		e = badRequest(typ + " frame for stream " + id + ", a server stream: it takes no messages from the client")
	case st.halfClosed:
		e = badRequest(typ + " frame for stream " + id + " after its end frame")
	}
	if e != nil {
		wc.fail(st, e)
		return nil, nil
	}
	return st, nil
}

// streamOf returns stream id (nil: none), waiting while id is a request
// whose route is not known yet: a client sends a stream's msg frames
// right after its req frame. It reports false when the connection
// closes meanwhile.
func (wc *wsConn) streamOf(id string) (*wsStream, bool) {
	wc.mu.Lock()
	for {
		if st := wc.streams[id]; st != nil {
			wc.mu.Unlock()
			return st, true
		}
		if r, ok := wc.inflight[id]; !ok || r.routed {
			wc.mu.Unlock()
			return nil, true
		}
		if wc.routing == nil {
			wc.routing = make(chan struct{})
		}
		routing := wc.routing
		wc.mu.Unlock()
		select {
		case <-routing:
		case <-wc.ctx.Done():
			return nil, false
		}
		wc.mu.Lock()
	}
}

// fail ends a stream with e, a client's mistake.
func (wc *wsConn) fail(st *wsStream, e *apiError) {
	wc.mu.Lock()
	if st.failure == nil {
		st.failure = e
	}
	wc.mu.Unlock()
	st.cancel()
}
