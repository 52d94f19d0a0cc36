package mux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/wizardmesh/wizard/runtime/internal/flow"
	"github.com/wizardmesh/wizard/runtime/internal/streamconn"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// stream is what the two sides of a stream share: the flow control of
// its data both ways (runtime/internal/flow, under mu), and its end. See
// the package documentation, # Streams.
type stream struct {
	c  *conn
	id uint64

	mu      sync.Mutex
	flow    flow.Flow // the window and queue of what this side receives, the credit of what it sends
	recvEnd error     // what Recv returns once the queue is empty: io.EOF or the end's error
	// Sending.
	sendEnd   bool // this side sent its close or end
	peerEnded bool // the server ended the stream: the client's Send returns io.EOF
	headed    bool // the server sent its header or a message: no header may follow
	// abort, once set, ends the stream at once: Send and Recv return it
	// without looking at the queue.
	abort error

	recvReady chan struct{} // cap 1: a message, the end or abort came
	sendReady chan struct{} // cap 1: credit or abort came
	done      chan struct{} // closed once abort is set
}

func newStream(c *conn, id uint64) *stream {
	st := &stream{
		c:         c,
		id:        id,
		recvReady: make(chan struct{}, 1),
		sendReady: make(chan struct{}, 1),
		done:      make(chan struct{}),
	}
	st.flow.Init(c.opts.StreamWindow, c.opts.autoWindow, &c.grown)
	return st
}

// signal wakes a waiter on ch, if any; the token waits for one otherwise.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// openCredit is the stream-credit frame a receiver with a window larger
// than the protocol's initial one sends at open, or nil.
func (st *stream) openCredit() *[]byte {
	if n := st.flow.OpenGrant(); n > 0 {
		return creditFrame(st.id, n)
	}
	return nil
}

// creditFrame returns an encoded stream-credit frame granting n bytes.
func creditFrame(id uint64, n int) *[]byte {
	var p [5]byte
	f := wire.Frame{Type: wire.TypeStreamCredit, ID: id, Payload: wire.AppendCredit(p[:0], uint32(n))}
	buf := getBuffer(f.Size())
	*buf = wire.AppendFrame(*buf, &f)
	return buf
}

// pushFrame encodes f and queues it for the writer without waiting: the
// stream frames are bounded by flow control (data) or by the stream's
// life (the others), not by the write queue's bound.
func (c *conn) pushFrame(f *wire.Frame) {
	buf := getBuffer(f.Size())
	*buf = wire.AppendFrame(*buf, f)
	c.push(buf)
}

// errCreditViolation is the reason a stream ends when its peer sent data
// beyond the credit it was granted.
const errCreditViolation = "wizard: stream peer sent data beyond its credit"

// deliver queues a data payload received for the stream, which the
// stream now owns. It reports false when the payload exceeds the credit
// the peer was granted: the caller ends the stream (as HTTP/2 answers a
// stream's FLOW_CONTROL_ERROR with RST_STREAM) and nothing is queued, so
// that a peer ignoring flow control costs no memory.
func (st *stream) deliver(codec wire.Codec, payload []byte) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.abort != nil || st.recvEnd != nil {
		return true // late data of a stream this side is done with: dropped
	}
	if !st.flow.Deliver(codec, payload) {
		return false
	}
	signal(st.recvReady)
	return true
}

// endRecv records that the peer sends no more data: Recv returns err
// (io.EOF for a clean end) once the queue is empty.
func (st *stream) endRecv(err error) {
	st.mu.Lock()
	if st.recvEnd == nil {
		st.recvEnd = err
	}
	st.flow.Release()
	st.mu.Unlock()
	signal(st.recvReady)
}

// fail aborts the stream with err unless it ended already; it reports
// whether it did. Pending and later Send and Recv return err.
func (st *stream) fail(err error) bool {
	st.mu.Lock()
	if st.abort != nil {
		st.mu.Unlock()
		return false
	}
	st.abort = err
	st.flow.Drop()
	st.mu.Unlock()
	close(st.done)
	signal(st.recvReady)
	signal(st.sendReady)
	return true
}

// addCredit adds credit granted by the peer.
func (st *stream) addCredit(n uint32) {
	st.mu.Lock()
	st.flow.AddCredit(n)
	st.mu.Unlock()
	signal(st.sendReady)
}

// recv takes the next message, waiting for one. It returns the stream's
// abort error, or recvEnd once the queue is empty and the peer ended.
// Taking a message grants credit back once half the window is taken.
func (st *stream) recv(ctx context.Context) (wire.Codec, []byte, error) {
	for {
		st.mu.Lock()
		if st.abort != nil {
			err := st.abort
			st.mu.Unlock()
			return 0, nil, err
		}
		if st.flow.Waiting() {
			m, grant := st.flow.Take(st.recvEnd == nil)
			if st.flow.Waiting() || st.recvEnd != nil {
				signal(st.recvReady) // for another Recv waiting
			}
			st.mu.Unlock()
			if grant > 0 {
				st.c.push(creditFrame(st.id, grant))
			}
			return m.Codec, m.Payload, nil
		}
		if st.recvEnd != nil {
			err := st.recvEnd
			st.mu.Unlock()
			return 0, nil, err
		}
		st.mu.Unlock()
		select {
		case <-st.recvReady:
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
}

// queued returns the payload bytes received and not taken yet.
func (st *stream) queued() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.flow.Queued()
}

// send sends one message once the stream's credit allows it, waiting
// for credit at most until ctx ends. closed is what a send after this
// side's close returns.
func (st *stream) send(ctx context.Context, codec wire.Codec, payload []byte, closed error) error {
	return st.sendFrame(ctx, wire.Frame{Type: wire.TypeStreamData, Codec: codec, ID: st.id, Payload: payload}, closed)
}

// sendFrame sends f, a data frame whose payload is its Payload or its
// Body (encoded into the frame's buffer before sendFrame returns, so
// that the body is the caller's again), as send does.
func (st *stream) sendFrame(ctx context.Context, f wire.Frame, closed error) error {
	if size := f.Size(); size-4 > st.c.opts.MaxFrameSize {
		return fmt.Errorf("wizard: mux: stream message of %d bytes: %w (limit %d)", size-4, wire.ErrFrameTooLarge, st.c.opts.MaxFrameSize)
	}
	n := len(f.Payload)
	if f.Body != nil {
		n = f.Body.Len()
	}
	for {
		st.mu.Lock()
		switch {
		case st.abort != nil:
			err := st.abort
			st.mu.Unlock()
			return err
		case st.sendEnd:
			st.mu.Unlock()
			return closed
		case st.peerEnded:
			st.mu.Unlock()
			return io.EOF
		case st.flow.Spend(n):
			st.headed = true
			// Queued under st.mu, so that data frames leave in the order
			// their credit was taken, and never after this side's end.
			st.c.pushFrame(&f)
			st.mu.Unlock()
			return nil
		}
		st.mu.Unlock()
		select {
		case <-st.sendReady:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// closeSend queues f, this side's last frame of the stream (a
// stream-close or stream-end), unless it sent one already or the stream
// was aborted; it reports whether it did.
func (st *stream) closeSend(f *wire.Frame) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.sendEnd || st.abort != nil {
		return false
	}
	st.sendEnd = true
	st.c.pushFrame(f)
	return true
}

// StreamError is the error a stream ends with when its end carries a code
// other than OK: the server's handler returned it (or the mux ended the
// stream, refusing it or for a broken flow control). Code is gRPC's
// numbering; Details are opaque to the mux (the runtime encodes its error
// details there). It is the transports' one stream error
// (streamconn.Error).
type StreamError = streamconn.Error

// ErrStreamsUnsupported is the error of [Client.OpenStream] on a
// connection whose server did not announce [wire.FeatureStreams] in its
// handshake: it predates streams. Nothing was sent.
var ErrStreamsUnsupported = streamconn.ErrUnsupported

// errSendClosed is the error of a client's Send after its CloseSend.
var errSendClosed = errors.New("wizard: mux: send on a stream after CloseSend")

// errSendEnded is the error of a server's Send after its handler
// returned.
var errSendEnded = errors.New("wizard: mux: send on a stream that has ended")

// endPayload returns the end frame's error payload for a handler's error:
// code 0 for nil, the code of a *StreamError, canceled or
// deadline_exceeded for ctx's errors, unknown for any other.
func endPayload(err error) []byte {
	var se *StreamError
	switch {
	case err == nil:
		return wire.AppendError(nil, 0, "")
	case errors.As(err, &se):
		return append(wire.AppendError(nil, se.Code, se.Message), se.Details...)
	case errors.Is(err, context.Canceled):
		return wire.AppendError(nil, codeCanceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return wire.AppendError(nil, codeDeadlineExceeded, err.Error())
	}
	return wire.AppendError(nil, codeUnknown, err.Error())
}

// endError returns what Recv returns for an end frame's error payload:
// io.EOF for code 0, else a *StreamError.
func endError(payload []byte) error {
	code, msg, details, err := wire.DecodeErrorDetails(payload)
	if err != nil {
		return &StreamError{Code: codeInternal, Message: "wizard: malformed stream end: " + err.Error()}
	}
	if code == 0 {
		return io.EOF
	}
	return &StreamError{Code: code, Message: msg, Details: details}
}

// copyMeta returns a copy of meta that owns its strings.
func copyMeta(meta []wire.Meta) []wire.Meta {
	if len(meta) == 0 {
		return nil
	}
	out := make([]wire.Meta, len(meta))
	for i, m := range meta {
		out[i] = wire.Meta{Key: string([]byte(m.Key)), Value: string([]byte(m.Value))}
	}
	return out
}

// The mux's streams are the transports' (runtime/tcp's and runtime/quic's).
var (
	_ streamconn.Client     = (*ClientStream)(nil)
	_ streamconn.Stream     = (*ServerStream)(nil)
	_ streamconn.BodySender = (*ClientStream)(nil)
	_ streamconn.BodySender = (*ServerStream)(nil)
)
