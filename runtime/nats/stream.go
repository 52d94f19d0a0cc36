package nats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/bridge"
	"github.com/wizardmesh/wizard/runtime/internal/flow"
	"github.com/wizardmesh/wizard/runtime/internal/streamconn"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// stream is what the two sides of a stream over the broker share: the
// flow control of its data both ways, the queue of messages received and
// not yet taken, its end, and the subject its frames go to. See the
// package documentation, # Streams.
//
// Flow control is the mux's, runtime/internal/flow under mu: credit in
// bytes, each message costing its size plus wire.MessageCost, the
// receive window ([WithStreamWindow]) granted back as the application
// takes messages, the default window growing for a stream of large
// messages whose reader keeps up, within a budget its caller and node
// share. NATS core has no flow control of its own: this is what bounds a
// sender whose receiver stops reading, and the receiver's memory.
type stream struct {
	nc       *natsgo.Conn
	subject  string // where this side's frames go
	reply    string // their reply subject: the stream's, on the caller's side; "" on the node's
	where    string // "wizard: nats: <node subject>", to start errors
	maxFrame func() int

	mu sync.Mutex
	// The frames' numbers, each way: see publish.
	seqOut, seqIn uint64
	flow          flow.Flow // the window and queue of what this side receives, the credit of what it sends
	recvEnd       error     // what Recv returns once the queue is empty: io.EOF or the end's error
	// Sending.
	sendEnd   bool // this side sent its close, end or cancel: it sends no more data
	gone      bool // this side sent its end or cancel: it sends no frame any more
	peerEnded bool // the node ended the stream: the caller's Send returns io.EOF
	headed    bool // the node sent its header or a message: no header may follow
	// abort, once set, ends the stream at once: Send and Recv return it
	// without looking at the queue.
	abort error

	recvReady chan struct{} // cap 1: a message, the end or abort came
	sendReady chan struct{} // cap 1: credit or abort came
}

func (st *stream) init(nc *natsgo.Conn, subject, reply, where string, maxFrame func() int, window int, auto bool, budget *atomic.Int64) {
	st.nc, st.subject, st.reply, st.where, st.maxFrame = nc, subject, reply, where, maxFrame
	st.flow.Init(window, auto, budget)
	st.recvReady = make(chan struct{}, 1)
	st.sendReady = make(chan struct{}, 1)
}

// signal wakes a waiter on ch, if any; the token waits for one otherwise.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// publish sends f to the peer; st.mu is held. Frames of one side of a
// stream are published by one broker connection to one subscription of
// the peer's, so the peer takes them in the order they were published.
// NATS core may drop messages on the way (to a slow consumer), and a
// stream must not lose a message silently: publish numbers the frames of
// its side in the frame's id, from 1 (the caller's open), and the peer
// checks that none is missing (inOrder).
func (st *stream) publish(f *wire.Frame) error {
	st.seqOut++
	f.ID = st.seqOut
	fb := encodePooled(f)
	var err error
	if st.reply != "" {
		err = st.nc.PublishRequest(st.subject, st.reply, fb.b)
	} else {
		err = st.nc.Publish(st.subject, fb.b)
	}
	fb.free()
	return err
}

// The reasons of a stream's end that come from the stream itself.
var (
	// errFramesLost ends a stream a frame of which did not arrive.
	errFramesLost = &streamconn.Error{Code: uint32(runtime.CodeUnavailable), Message: "wizard: nats: stream frames lost on the way (the broker drops messages to a slow consumer)"}
	// errCreditViolation ends a stream whose peer sent data beyond the
	// credit it was granted, as the mux ends one.
	errCreditViolation = &streamconn.Error{Code: uint32(runtime.CodeResourceExhausted), Message: "wizard: stream peer sent data beyond its credit"}
	// errSendClosed is the error of a caller's Send after its CloseSend.
	errSendClosed = errors.New("wizard: nats: send on a stream after CloseSend")
	// errSendEnded is the error of a node's Send after its handler
	// returned.
	errSendEnded = errors.New("wizard: nats: send on a stream that has ended")
	// errHeaderLate is the error of a SendHeader after a message or a
	// first SendHeader.
	errHeaderLate = errors.New("wizard: nats: stream header after the header or a message")
)

// badStreamFrame is the end of a stream whose peer sent a frame that
// breaks its protocol (a malformed credit, a frame of the wrong way).
func badStreamFrame(why string) error {
	return &streamconn.Error{Code: uint32(runtime.CodeInternal), Message: "wizard: nats: malformed stream frame: " + why}
}

// inOrder reports whether id is the number of the peer's next frame,
// and counts it.
func (st *stream) inOrder(id uint64) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if id != st.seqIn+1 {
		return false
	}
	st.seqIn = id
	return true
}

// deliver queues a data payload received for the stream, which the
// stream now owns. It reports false when the payload exceeds the credit
// the peer was granted: the caller ends the stream and nothing is queued,
// so that a peer ignoring flow control costs no memory.
// The payload aliases the data of the NATS message it came in, which
// nats.go allocated for it; it is capped so that appending to it cannot
// reach its neighbours.
func (st *stream) deliver(codec wire.Codec, payload []byte) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.abort != nil || st.recvEnd != nil {
		return true // late data of a stream this side is done with: dropped
	}
	if !st.flow.Deliver(codec, payload[:len(payload):len(payload)]) {
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
	signal(st.recvReady)
	signal(st.sendReady)
	return true
}

// addCredit takes a stream-credit frame's payload; it returns the
// reason to end the stream when the payload is malformed.
func (st *stream) addCredit(payload []byte) error {
	n, err := wire.DecodeCredit(payload)
	if err != nil {
		return badStreamFrame(err.Error())
	}
	st.mu.Lock()
	st.flow.AddCredit(n)
	st.mu.Unlock()
	signal(st.sendReady)
	return nil
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
			m, grant := st.flow.Take(st.recvEnd == nil && !st.gone)
			if grant > 0 {
				var p [5]byte
				// Under st.mu: a grant never follows this side's end.
				_ = st.publish(&wire.Frame{Type: wire.TypeStreamCredit, Payload: wire.AppendCredit(p[:0], uint32(grant))})
			}
			if st.flow.Waiting() || st.recvEnd != nil {
				signal(st.recvReady) // for another Recv waiting
			}
			st.mu.Unlock()
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

// openCredit publishes the stream-credit frame of a receive window
// larger than the protocol's initial one, at open.
func (st *stream) openCredit() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if n := st.flow.OpenGrant(); n > 0 {
		var p [5]byte
		_ = st.publish(&wire.Frame{Type: wire.TypeStreamCredit, Payload: wire.AppendCredit(p[:0], uint32(n))})
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
// side's close returns. A publish that fails (the broker connection is
// down) ends the stream as lost.
func (st *stream) send(ctx context.Context, codec wire.Codec, payload []byte, closed error) error {
	f := wire.Frame{Type: wire.TypeStreamData, Codec: codec, Payload: payload}
	if size, max := f.Size()-4, st.maxFrame(); size > max {
		return fmt.Errorf("%s: stream message of %d bytes: %w (limit %d)", st.where, size, wire.ErrFrameTooLarge, max)
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
		case st.flow.Spend(len(payload)):
			st.headed = true
			// Published under st.mu, so that data frames leave in the
			// order their credit was taken, and never after this side's
			// end.
			err := st.publish(&f)
			st.mu.Unlock()
			if err != nil {
				err = bridge.Lost(st.where, err)
				st.fail(err)
			}
			return err
		}
		st.mu.Unlock()
		select {
		case <-st.sendReady:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// closeData publishes f, the caller's stream-close, unless it sent one
// already or the stream has ended; it reports whether it did.
func (st *stream) closeData(f *wire.Frame) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.sendEnd || st.gone || st.abort != nil {
		return false
	}
	st.sendEnd = true
	_ = st.publish(f)
	return true
}

// last publishes f, this side's last frame of the stream (the node's
// end, the caller's cancel), unless it sent one already; it reports
// whether it did.
func (st *stream) last(f *wire.Frame) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.gone {
		return false
	}
	st.gone, st.sendEnd = true, true
	_ = st.publish(f)
	return true
}

// silence marks the stream as one this side sends nothing more on, its
// peer gone or done with it; it reports whether it was not already.
func (st *stream) silence() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	was := st.gone
	st.gone, st.sendEnd = true, true
	return !was
}
