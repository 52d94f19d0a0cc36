package mux

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// ClientStream is the calling side of one stream. Send and CloseSend may
// be called by one goroutine while another calls Recv; each of them is
// for one goroutine at a time.
type ClientStream struct {
	st *stream
	cl *Client

	mu        sync.Mutex
	header    []wire.Meta
	trailer   []wire.Meta
	gotHeader bool          // the header, or the end, came
	hdr       chan struct{} // closed when gotHeader is set
	stop      func() bool   // stops the watch over OpenStream's ctx; nil until set
	ended     bool          // the stream ended: the watch is stopped, or is when set
}

// OpenStream opens a stream to open.Pattern with open's flags and meta
// (the client's headers), and ctx's deadline (or open.Deadline, the
// shorter). The stream lives until the server ends it, ctx ends (the
// server is told with a cancel frame; the stream's Send and Recv then
// return ctx's error) or [ClientStream.Cancel]. The codec and payload of
// open are ignored: the messages go with [ClientStream.Send].
//
// OpenStream fails with [ErrStreamsUnsupported] at once, sending nothing,
// when the server's handshake did not announce streams; with
// [ErrGoingAway] once the server said goaway; with a [*CallError] (kind
// [ErrNotSent]) when the connection has ended. It does not wait for the
// server: a refusal (over MaxStreams, no stream handler) comes as the
// stream's end, from Recv or Header.
func (cl *Client) OpenStream(ctx context.Context, open *wire.Frame) (*ClientStream, error) {
	if !cl.peer.Has(wire.FeatureStreams) {
		return nil, ErrStreamsUnsupported
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := cl.c
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
	if size := f.Size(); size-4 > c.opts.MaxFrameSize {
		return nil, fmt.Errorf("wizard: mux: stream open of %d bytes: %w (limit %d)", size-4, wire.ErrFrameTooLarge, c.opts.MaxFrameSize)
	}
	buf := getBuffer(f.Size())
	*buf = wire.AppendFrame(*buf, &f)

	if err := c.lockSpace(ctx); err != nil {
		putBuffer(buf)
		if err == errNoWriter {
			return nil, cl.refused(cl.goingAway.Load())
		}
		return nil, err
	}
	if cl.goaway || cl.closed {
		goaway := cl.goaway
		c.mu.Unlock()
		putBuffer(buf)
		return nil, cl.refused(goaway)
	}
	cl.nextID++
	id := cl.nextID
	wire.SetFrameID(*buf, id)
	cs := &ClientStream{st: newStream(c, id), cl: cl, hdr: make(chan struct{})}
	cl.streams[id] = cs
	if c.armed { // keep-alive watches the peer more closely while streams are open
		c.armed = false
		c.busyLocked()
	}
	// The open goes through the writer with its id, so that the
	// connection's end tells whether it may have reached the server.
	c.pushLocked(outFrame{buf: buf, id: id})
	if credit := cs.st.openCredit(); credit != nil {
		c.pushLocked(outFrame{buf: credit})
	}
	c.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { cs.cancel(ctx.Err()) })
	cs.mu.Lock()
	if cs.ended {
		stop()
	} else {
		cs.stop = stop
	}
	cs.mu.Unlock()
	return cs, nil
}

// ID returns the stream's id.
func (cs *ClientStream) ID() uint64 { return cs.st.id }

// Send sends one message, waiting for the stream's credit at most until
// ctx ends (a ctx that ends leaves the stream as it was: the message was
// not sent). It returns the stream's error once it has ended: the
// server's end ([io.EOF] for a clean one: [ClientStream.Recv] tells the
// outcome), a cancel, or the connection's loss.
func (cs *ClientStream) Send(ctx context.Context, codec wire.Codec, payload []byte) error {
	return cs.st.send(ctx, codec, payload, errSendClosed)
}

// SendBody is Send for a message that body encodes straight into its
// frame, before SendBody returns.
func (cs *ClientStream) SendBody(ctx context.Context, codec wire.Codec, body wire.Body) error {
	return cs.st.sendFrame(ctx, wire.Frame{Type: wire.TypeStreamData, Codec: codec, ID: cs.st.id, Body: body}, errSendClosed)
}

// CloseSend tells the server that the client sends no more messages
// (a stream-close frame); Recv goes on. It is idempotent.
func (cs *ClientStream) CloseSend() error {
	cs.st.closeSend(&wire.Frame{Type: wire.TypeStreamClose, ID: cs.st.id})
	return nil
}

// Recv returns the next message from the server, waiting at most until
// ctx ends: its codec and payload, which the caller owns. After the
// server's end it returns [io.EOF] (code OK) or a [*StreamError] with the
// end's code, message and details, once the messages before the end are
// taken. A cancel returns the cancel's error (ctx's), the connection's
// loss a [*CallError] (kind [ErrConnLost], or [ErrNotSent] when the open
// never left), a goaway [ErrGoingAway].
func (cs *ClientStream) Recv(ctx context.Context) (wire.Codec, []byte, error) {
	return cs.st.recv(ctx)
}

// Header waits for the server's headers (a stream-header frame), its
// first message or the stream's end, at most until ctx ends, and returns
// them: nil, nil when the server sent none (as gRPC's, Recv then tells
// how the stream ended), and the stream's error when it was cancelled or
// its connection lost before they came.
func (cs *ClientStream) Header(ctx context.Context) ([]wire.Meta, error) {
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

// Trailer returns the server's trailers, once Recv has returned the
// stream's end; nil before.
func (cs *ClientStream) Trailer() []wire.Meta {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.trailer
}

// Queued returns the payload bytes received and not taken by Recv yet:
// at most the stream's window plus one message.
func (cs *ClientStream) Queued() int { return cs.st.queued() }

// Cancel gives up on the stream: the server is told with a cancel frame,
// and Send and Recv return context.Canceled. It does nothing once the
// stream has ended.
func (cs *ClientStream) Cancel() { cs.cancel(context.Canceled) }

// cancel ends the stream with err, telling the server when the stream
// was open.
func (cs *ClientStream) cancel(err error) {
	open := cs.forget()
	cs.st.fail(err)
	if open {
		cs.cl.c.pushControl(wire.TypeCancel, cs.st.id)
	}
	cs.finish()
}

// forget removes the stream from the client's table; it reports whether
// it was there (the stream had not ended yet).
func (cs *ClientStream) forget() bool {
	c := cs.cl.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs.cl.streams[cs.st.id] != cs {
		return false
	}
	delete(cs.cl.streams, cs.st.id)
	return true
}

// headed marks the header as come (or never coming).
func (cs *ClientStream) headed() {
	cs.mu.Lock()
	cs.headedLocked()
	cs.mu.Unlock()
}

func (cs *ClientStream) headedLocked() {
	if !cs.gotHeader {
		cs.gotHeader = true
		close(cs.hdr)
	}
}

// finish marks the stream ended: no header will come, and the watch over
// OpenStream's ctx stops.
func (cs *ClientStream) finish() {
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

// end takes the server's end frame: the messages before it stay for Recv.
func (cs *ClientStream) end(f *wire.Frame) {
	err := endError(f.Payload)
	if se, ok := err.(*StreamError); ok && f.Flags&wire.FlagRefused != 0 {
		se.Refused = true
	}
	trailer := copyMeta(f.Meta)
	cs.mu.Lock()
	cs.trailer = trailer
	cs.mu.Unlock()
	cs.st.mu.Lock()
	cs.st.peerEnded = true // the server reads no more: Send returns io.EOF
	cs.st.mu.Unlock()
	cs.st.endRecv(err)
	cs.finish()
}

// dispatchStream handles a stream frame from the server. A frame for a
// stream the client no longer knows (cancelled, ended) is dropped.
func (cl *Client) dispatchStream(f *wire.Frame, own bool) error {
	c := cl.c
	c.mu.Lock()
	cs := cl.streams[f.ID]
	if cs != nil && f.Type == wire.TypeStreamEnd {
		delete(cl.streams, f.ID)
	}
	c.mu.Unlock()
	if cs == nil {
		if f.Type == wire.TypeStreamCredit {
			if _, err := wire.DecodeCredit(f.Payload); err != nil {
				return err
			}
		}
		return nil
	}
	switch f.Type {
	case wire.TypeStreamData:
		payload := f.Payload
		if !own {
			payload = append([]byte(nil), payload...)
		}
		if !cs.st.deliver(f.Codec, payload) {
			cs.cancel(&StreamError{Code: codeResourceExhausted, Message: errCreditViolation})
		}
		cs.headed() // a message first: the server sends no header
	case wire.TypeStreamHeader:
		meta := copyMeta(f.Meta)
		cs.mu.Lock()
		if !cs.gotHeader {
			cs.header = meta
		}
		cs.headedLocked()
		cs.mu.Unlock()
	case wire.TypeStreamEnd:
		cs.end(f)
	case wire.TypeStreamCredit:
		n, err := wire.DecodeCredit(f.Payload)
		if err != nil {
			return err
		}
		cs.st.addCredit(n)
	}
	return nil
}

// failStreams ends streams taken from the table with err(id): the
// connection's end, or a goaway; c.mu is not held.
func (cl *Client) failStreams(streams []*ClientStream, err func(id uint64) error) {
	for _, cs := range streams {
		cs.st.fail(err(cs.st.id))
		cs.finish()
	}
}
