package nats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/bridge"
	"github.com/wizardmesh/wizard/runtime/internal/streamconn"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

var _ streamconn.Opener = (*Conn)(nil)

// clientStream is the calling side of one stream: its frames go to the
// node's subject with the stream's subject, <inbox><id>, as their reply
// subject, which names the stream to the node; the node's come to that
// subject, through the broker's reply subscription.
type clientStream struct {
	st stream
	c  *Conn
	id uint64

	mu        sync.Mutex
	header    []wire.Meta
	trailer   []wire.Meta
	gotHeader bool          // the header, or the end, came
	hdr       chan struct{} // closed when gotHeader is set
	stop      func() bool   // stops the watch over OpenStream's ctx; nil until set
	ended     bool          // the stream ended: the watch is stopped, or is when set
}

var _ streamconn.Client = (*clientStream)(nil)

// OpenStream opens a stream to open.Pattern with open's flags and meta
// (the caller's headers), and ctx's deadline (or open.Deadline, the
// shorter): it publishes the open to the node's subject and returns. A
// refusal comes as the stream's end. It fails as not sent
// ([runtime.ErrNotSent]) when the node did not say in its pong that it
// serves streams (then matching streamconn.ErrUnsupported too), when it
// is going away or the connection has ended, and when the publish fails.
func (c *Conn) OpenStream(ctx context.Context, open *wire.Frame) (streamconn.Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !c.streams.Load() {
		return nil, bridge.NotSent(c.where, streamconn.ErrUnsupported)
	}
	f := wire.Frame{Type: wire.TypeStreamOpen, Flags: open.Flags, Deadline: open.Deadline, Pattern: open.Pattern, Meta: open.Meta}
	if dl, ok := ctx.Deadline(); ok {
		d := time.Until(dl)
		if d <= 0 {
			return nil, context.DeadlineExceeded
		}
		if f.Deadline <= 0 || d < f.Deadline {
			f.Deadline = d
		}
	}
	b := c.b
	if size, max := f.Size()-4, b.maxFrame(); size > max {
		// Refused here, as a call's request of that size is.
		return nil, runtime.NewError(runtime.CodeResourceExhausted, fmt.Sprintf("%s: stream open of %d bytes: frame too large (limit %d)", c.where, size, max))
	}
	if err := c.beginStream(); err != nil {
		return nil, err
	}
	id := b.next.Add(1)
	cs := &clientStream{c: c, id: id, hdr: make(chan struct{})}
	cs.st.init(b.nc, c.subject, b.inbox+strconv.FormatUint(id, 36), c.where, b.maxFrame, b.t.streamWindow, b.t.autoWindow, &c.grown)
	b.mu.Lock()
	b.streams[id] = cs
	b.mu.Unlock()
	cs.st.mu.Lock()
	err := cs.st.publish(&f)
	cs.st.mu.Unlock()
	if err != nil {
		if cs.forget() {
			c.endStream()
		}
		return nil, bridge.NotSent(c.where, err)
	}
	cs.st.openCredit()
	stop := context.AfterFunc(ctx, func() {
		if err := ctx.Err(); err == context.DeadlineExceeded {
			// The node's stream ends at the same deadline, the open's,
			// and says so to its handler: no cancel overtakes it.
			cs.expire(err)
		} else {
			cs.cancel(err)
		}
	})
	cs.mu.Lock()
	if cs.ended {
		stop()
	} else {
		cs.stop = stop
	}
	cs.mu.Unlock()
	return cs, nil
}

// beginStream counts a stream open on c, or returns why it cannot be
// opened; a stream counts as a call in flight too, so that a node going
// away ends the connection only once its streams have ended.
func (c *Conn) beginStream() error {
	if err := c.begin(); err != nil {
		return err
	}
	c.mu.Lock()
	c.nstreams++
	c.mu.Unlock()
	return nil
}

// endStream counts a stream ended.
func (c *Conn) endStream() {
	c.mu.Lock()
	c.nstreams--
	c.mu.Unlock()
	c.end()
}

// Send sends one message, waiting for the stream's credit at most until
// ctx ends. It returns io.EOF once the node has ended the stream (Recv
// tells how), and the stream's error once it was cancelled or lost.
func (cs *clientStream) Send(ctx context.Context, codec wire.Codec, payload []byte) error {
	return cs.st.send(ctx, codec, payload, errSendClosed)
}

// CloseSend tells the node that the caller sends no more messages; Recv
// goes on. It is idempotent.
func (cs *clientStream) CloseSend() error {
	cs.st.closeData(&wire.Frame{Type: wire.TypeStreamClose})
	return nil
}

// Recv returns the next message from the node. After the node's end it
// returns io.EOF (code OK) or a *streamconn.Error, once the messages
// before the end are taken; a cancel returns its error (ctx's), a lost
// node or broker connection an error that reads "connection lost after
// the call was sent".
func (cs *clientStream) Recv(ctx context.Context) (wire.Codec, []byte, error) {
	return cs.st.recv(ctx)
}

// Header waits for the node's headers, its first message or the
// stream's end, at most until ctx ends: nil, nil when the node sent
// none, and the stream's error when it was cancelled or lost first.
func (cs *clientStream) Header(ctx context.Context) ([]wire.Meta, error) {
	select {
	case <-cs.hdr:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	cs.mu.Lock()
	h := cs.header
	cs.mu.Unlock()
	if h == nil {
		cs.st.mu.Lock()
		err := cs.st.abort
		cs.st.mu.Unlock()
		return nil, err
	}
	return h, nil
}

// Trailer returns the node's trailers once Recv has returned the end.
func (cs *clientStream) Trailer() []wire.Meta {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.trailer
}

// Queued returns the payload bytes received and not taken by Recv yet:
// at most the window plus one message.
func (cs *clientStream) Queued() int { return cs.st.queued() }

// Cancel gives up on the stream: the node is told, and Send and Recv
// return context.Canceled. It does nothing once the stream has ended.
func (cs *clientStream) Cancel() { cs.cancel(context.Canceled) }

// cancel ends the stream with err, telling the node when the stream was
// open.
func (cs *clientStream) cancel(err error) {
	open := cs.forget()
	cs.st.fail(err)
	if open {
		cs.st.last(&wire.Frame{Type: wire.TypeCancel})
		cs.c.endStream()
	}
	cs.finish()
}

// expire ends the stream with err, ctx's deadline, which the node's side
// of the stream has too: the node is not told.
func (cs *clientStream) expire(err error) {
	if cs.forget() {
		cs.st.silence()
		cs.c.endStream()
	}
	cs.st.fail(err)
	cs.finish()
}

// forget removes the stream from the broker's table; it reports whether
// it was there (the stream had not ended yet): whoever removes it counts
// it ended on its connection.
func (cs *clientStream) forget() bool {
	b := cs.c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.streams[cs.id] != cs {
		return false
	}
	delete(b.streams, cs.id)
	return true
}

// headedLocked marks the header as come (or never coming); cs.mu is
// held.
func (cs *clientStream) headedLocked() {
	if !cs.gotHeader {
		cs.gotHeader = true
		close(cs.hdr)
	}
}

// finish marks the stream ended: no header will come, and the watch over
// OpenStream's ctx stops.
func (cs *clientStream) finish() {
	cs.mu.Lock()
	cs.headedLocked()
	cs.ended = true
	stop := cs.stop
	cs.stop = nil
	cs.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// lost ends the stream, which its connection's end took from the
// broker's table, with err.
func (cs *clientStream) lost(err error) {
	cs.st.silence()
	cs.st.fail(err)
	cs.c.endStream()
	cs.finish()
}

// end takes the node's end frame: the messages before it stay for Recv.
func (cs *clientStream) end(f *wire.Frame) {
	err := endError(f.Payload)
	if se, ok := err.(*streamconn.Error); ok && f.Flags&wire.FlagRefused != 0 {
		se.Refused = true
	}
	trailer := copyMeta(f.Meta)
	cs.mu.Lock()
	cs.trailer = trailer
	cs.mu.Unlock()
	cs.st.mu.Lock()
	cs.st.peerEnded = true // the node reads no more: Send returns io.EOF
	cs.st.gone = true      // and wants nothing more, not even credit
	cs.st.mu.Unlock()
	cs.st.endRecv(err)
	cs.c.endStream()
	cs.finish()
}

// onFrame takes one frame of the node for the stream, from the broker's
// reply subscription.
func (cs *clientStream) onFrame(f *wire.Frame) {
	if !cs.st.inOrder(f.ID) {
		cs.cancel(errFramesLost)
		return
	}
	switch f.Type {
	case wire.TypeStreamData:
		if !cs.st.deliver(f.Codec, f.Payload) {
			cs.cancel(errCreditViolation)
			return
		}
		cs.mu.Lock()
		cs.headedLocked() // a message first: the node sends no header
		cs.mu.Unlock()
	case wire.TypeStreamHeader:
		meta := copyMeta(f.Meta)
		cs.mu.Lock()
		if !cs.gotHeader {
			cs.header = meta
		}
		cs.headedLocked()
		cs.mu.Unlock()
	case wire.TypeStreamEnd:
		if cs.forget() {
			cs.end(f)
		}
	case wire.TypeStreamCredit:
		if err := cs.st.addCredit(f.Payload); err != nil {
			cs.cancel(err)
		}
	default:
		cs.cancel(badStreamFrame("a " + f.Type.String() + " frame from the node"))
	}
}

// onStream hands a message on a stream's subject to the stream: one
// frame, or a batch of them. A malformed message ends the stream; a
// node's ping is answered.
func (b *broker) onStream(cs *clientStream, m *natsgo.Msg) {
	cs.c.heard()
	if b.pong(m) {
		return
	}
	data, max := m.Data, b.maxFrame()
	if err := checkBatch(data, max); err != nil {
		cs.cancel(badStreamFrame(err.Error()))
		return
	}
	for len(data) > 0 {
		var f wire.Frame
		var err error
		if data, err = nextFrame(data, max, &f); err != nil {
			cs.cancel(badStreamFrame(err.Error()))
			return
		}
		cs.onFrame(&f)
	}
}

// pong answers m if it is a node's ping of this caller, on a stream's
// subject (see Listener.watchCallers), and reports whether it was. The
// pong goes to the node's subject, which the ping names in its pattern,
// with the stream's subject as reply, as the caller's other frames go,
// so that a caller needs no permission to publish to the nodes' inboxes;
// it goes only to a node the caller has a connection to.
func (b *broker) pong(m *natsgo.Msg) bool {
	if len(m.Data) > wire.MinFrameSize+4+maxSubject+2 {
		return false
	}
	var f wire.Frame
	if decodeFrame(m.Data, wire.MinFrameSize+maxSubject+2, &f) != nil || f.Type != wire.TypePing {
		return false
	}
	b.mu.Lock()
	known := false
	for c := range b.conns {
		if c.subject == f.Pattern {
			known = true
			break
		}
	}
	b.mu.Unlock()
	if known {
		fb := encodePooled(&wire.Frame{Type: wire.TypePong})
		_ = b.nc.PublishRequest(f.Pattern, m.Subject, fb.b)
		fb.free()
	}
	return true
}

// endError returns what Recv returns for an end frame's error payload:
// io.EOF for code 0, else a *streamconn.Error.
func endError(payload []byte) error {
	code, msg, details, err := wire.DecodeErrorDetails(payload)
	if err != nil {
		return &streamconn.Error{Code: uint32(runtime.CodeInternal), Message: "wizard: malformed stream end: " + err.Error()}
	}
	if code == 0 {
		return io.EOF
	}
	return &streamconn.Error{Code: code, Message: msg, Details: append([]byte(nil), details...)}
}

// endPayload returns the end frame's error payload for a handler's error:
// code 0 for nil, the code of a *streamconn.Error, canceled or
// deadline_exceeded for ctx's errors, unknown for any other.
func endPayload(err error) []byte {
	var se *streamconn.Error
	switch {
	case err == nil:
		return wire.AppendError(nil, 0, "")
	case errors.As(err, &se):
		return append(wire.AppendError(nil, se.Code, se.Message), se.Details...)
	case errors.Is(err, context.Canceled):
		return wire.AppendError(nil, uint32(runtime.CodeCanceled), err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return wire.AppendError(nil, uint32(runtime.CodeDeadlineExceeded), err.Error())
	}
	return wire.AppendError(nil, uint32(runtime.CodeUnknown), err.Error())
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
