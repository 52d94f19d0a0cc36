package mux

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// Client is the calling side of one connection. Its methods are safe for
// concurrent use; a caller's goroutine waits for its own answer, and the
// connection runs three goroutines in all (reader, writer, keep-alive),
// whatever the number of calls.
type Client struct {
	c *conn

	// Guarded by c.mu.
	pending map[uint64]*call
	streams map[uint64]*ClientStream // open streams
	nextID  uint64
	lastID  uint64 // with goaway: the highest id the server takes
	goaway  bool
	closed  bool // the connection ended and pending calls were failed
	alone   int  // calls in a row that found no other waiting, up to loneCalls (see send.go)

	goingAway atomic.Bool

	peer wire.Features // the server's, from its handshake

	// calls pools this connection's call records. It is per connection
	// rather than global so that their channels belong to the
	// connection's creator (testing/synctest bubbles rely on it).
	calls sync.Pool
}

// call is one pending call; its owner waits on ch. Calls are pooled.
type call struct {
	ch   chan struct{} // receives one value when resp or err is set
	resp wire.Frame    // by value: the record is pooled, the answer costs no allocation
	err  error
	meta []wire.Meta // the caller's room for the answer's metadata (see Do)
	room []byte      // the caller's room for the answer's body (see DoRoom)
	idem bool        // the request may run again elsewhere: given up on a stalled connection (see abandonStalled)
}

// NewClient starts the client side of a connection over rw: it writes the
// handshake, reads the server's and then serves calls until the stream
// fails or [Client.Close]. When the handshake fails (the server speaks
// another version: a *wire.VersionError) NewClient closes rw.
func NewClient(rw io.ReadWriteCloser, opts Options) (*Client, error) {
	opts, err := opts.normalize()
	if err != nil {
		rw.Close()
		return nil, err
	}
	br := newReader(rw)
	var peer wire.Features
	err = handshake(context.Background(), rw, opts.HandshakeTimeout, func() error {
		if err := wire.WriteHandshakeFeatures(rw, features); err != nil {
			return err
		}
		var err error
		peer, err = wire.ReadHandshakeFeatures(br)
		return err
	})
	if err != nil {
		rw.Close()
		err = fmt.Errorf("wizard: mux: handshake: %w", err)
		connLogger(opts.Logger, rw, "client").Warn("wizard: connection closed", "reason", err)
		return nil, err
	}
	cl := &Client{c: newConn(rw, br, opts, "client"), pending: make(map[uint64]*call), streams: make(map[uint64]*ClientStream), alone: loneCalls, peer: peer}
	cl.c.tw = newTryWriter(rw)
	cl.c.pendingCalls = func() int { return len(cl.pending) + len(cl.streams) }
	cl.c.stalled = cl.abandonStalled
	cl.c.start(cl.read)
	return cl, nil
}

// features are what this side announces in its handshake.
const features = wire.FeatureStreams

// Call sends req as a request and waits for the answer: a TypeResponse or
// TypeError frame that the caller owns, payload included. Call does not
// modify req; it assigns the request id and, when ctx has a deadline, sets
// the frame's Deadline to the remaining budget (unless req carries a
// shorter one).
//
// With [wire.FlagNoReply] Call returns (nil, nil) once the frame is
// queued. When ctx ends first, Call tells the server with a TypeCancel
// frame and returns ctx's error. When the connection ends first, the
// error wraps [ErrNotSent] if the request surely never reached the server
// (it may be retried anywhere) or [ErrConnLost] if it may have, and the
// reason the connection ended.
func (cl *Client) Call(ctx context.Context, req *wire.Frame) (*wire.Frame, error) {
	resp := new(wire.Frame)
	answered, err := cl.Do(ctx, req, resp)
	if !answered {
		return nil, err
	}
	return resp, err
}

// Do is [Client.Call] with the answer written into resp, which the caller
// provides (and may allocate together with other things). It reports
// whether resp was written: false for an error, and for a no-reply request
// once it is queued. The answer's metadata goes into resp.Meta's backing
// array when it fits (so that the caller may provide room for it), else
// into a slice of its own.
func (cl *Client) Do(ctx context.Context, req, resp *wire.Frame) (bool, error) {
	return cl.DoRoom(ctx, req, resp, nil)
}

// DoRoom is [Client.Do] with room for the answer's body: an answer that
// fits in room's capacity is copied into it, and resp's strings and
// Payload then alias room (a larger one gets a buffer of its own). The
// client writes room only before DoRoom returns, and only when it
// reports resp written.
func (cl *Client) DoRoom(ctx context.Context, req, resp *wire.Frame, room []byte) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	c := cl.c
	f := *req
	f.Type = wire.TypeRequest
	f.ID = 0
	if dl, ok := ctx.Deadline(); ok {
		d := time.Until(dl)
		if d <= 0 {
			return false, context.DeadlineExceeded
		}
		if f.Deadline <= 0 || d < f.Deadline {
			f.Deadline = d
		}
	}
	size := f.Size()
	if size-4 > c.opts.MaxFrameSize {
		return false, fmt.Errorf("wizard: mux: request of %d bytes: %w (limit %d)", size-4, wire.ErrFrameTooLarge, c.opts.MaxFrameSize)
	}
	buf := getBuffer(size)
	*buf = wire.AppendFrame(*buf, &f)
	noReply := f.Flags&wire.FlagNoReply != 0
	var p *call
	if !noReply {
		p = cl.getCall() // before locking: the lock is the connection's busiest
		p.meta = resp.Meta[:0]
		p.room = room[:0]
		p.idem = f.Flags&wire.FlagIdempotent != 0
	}

	if err := c.lockSpace(ctx); err != nil {
		putBuffer(buf)
		if p != nil {
			cl.putCall(p)
		}
		if err == errNoWriter { // the connection has ended
			return false, cl.refused(cl.goingAway.Load())
		}
		return false, err
	}
	if cl.goaway || cl.closed {
		goaway := cl.goaway
		c.mu.Unlock()
		putBuffer(buf)
		if p != nil {
			cl.putCall(p)
		}
		return false, cl.refused(goaway)
	}
	cl.nextID++
	id := cl.nextID
	wire.SetFrameID(*buf, id)
	lone := false // written by its caller (see send.go); no-reply bursts go through the writer, which coalesces them
	if !noReply {
		if len(cl.pending) > 0 {
			cl.alone = 0
		} else if cl.alone < loneCalls {
			cl.alone++
		}
		lone = cl.alone == loneCalls
		cl.pending[id] = p
		if c.armed { // keep-alive watches the peer more closely while calls wait
			c.armed = false
			c.busyLocked()
		}
	}
	if lone && c.sendLocked() {
		c.mu.Unlock()
		c.sendDirect(outFrame{buf: buf, id: id})
	} else {
		c.pushUnlock(outFrame{buf: buf, id: id})
	}
	if noReply {
		return false, nil
	}

	select {
	case <-p.ch:
	case <-ctx.Done():
		c.mu.Lock()
		mine := cl.pending[id] == p
		if mine {
			delete(cl.pending, id)
		}
		c.mu.Unlock()
		if mine {
			cl.putCall(p)
			c.pushControl(wire.TypeCancel, id)
			return false, ctx.Err()
		}
		<-p.ch // the answer won the race
	}
	err := p.err
	if err == nil {
		*resp = p.resp
	}
	cl.putCall(p)
	return err == nil, err
}

// abandonStalled fails the idempotent calls waiting for an answer with
// [ErrStalled], and tells the server with a cancel each: keep-alive found
// the peer silent under calls while its host acknowledged the ping (see
// keepalive.go). The connection stays, and so do the other calls: a call
// that must not run twice keeps waiting for its answer, while one that
// may run again goes elsewhere rather than wait out its deadline on a
// peer whose answers do not come (a process far behind, or answers lost
// on the way back, which TCP resends ever more slowly). An answer that
// comes later finds no call and is dropped.
func (cl *Client) abandonStalled() {
	c := cl.c
	var ids []uint64
	c.mu.Lock()
	for id, p := range cl.pending {
		if p.idem {
			delete(cl.pending, id)
			p.err = &CallError{Kind: ErrStalled, Reason: errStalledPeer}
			p.ch <- struct{}{}
			ids = append(ids, id)
		}
	}
	c.mu.Unlock()
	for _, id := range ids {
		c.pushControl(wire.TypeCancel, id)
	}
}

// refused returns the error of a call refused before it was queued: the
// server is going away, or the connection has ended.
func (cl *Client) refused(goaway bool) error {
	if goaway {
		return ErrGoingAway
	}
	return &CallError{Kind: ErrNotSent, Reason: cl.c.reason()}
}

// read is the reader goroutine. When the stream ends it fails the
// connection, waits for the writer to stop and fails the pending calls:
// those whose frame the writer never took with ErrNotSent, the others with
// ErrConnLost.
func (cl *Client) read() {
	c := cl.c
	err := c.readFrames(cl.dispatch)
	c.fail(err)
	<-c.writerDone
	c.drainQueue()

	c.mu.Lock()
	cl.closed = true
	pending := cl.pending
	cl.pending = nil
	streams := make([]*ClientStream, 0, len(cl.streams))
	for _, cs := range cl.streams {
		streams = append(streams, cs)
	}
	cl.streams = nil
	c.mu.Unlock()
	if len(pending) == 0 && len(streams) == 0 {
		return
	}
	reason := c.reason()
	written := c.written.Load()
	notSent := &CallError{Kind: ErrNotSent, Reason: reason}
	lost := &CallError{Kind: ErrConnLost, Reason: reason}
	cl.failStreams(streams, func(id uint64) error {
		if id <= written {
			return lost
		}
		return notSent
	})
	for id, p := range pending {
		p.err = notSent
		if id <= written {
			p.err = lost
		}
		p.ch <- struct{}{}
	}
}

// dispatch handles one frame from the server.
func (cl *Client) dispatch(f *wire.Frame, body []byte, own bool) error {
	c := cl.c
	switch f.Type {
	case wire.TypeResponse, wire.TypeError:
		c.mu.Lock()
		p := cl.pending[f.ID]
		if p != nil {
			delete(cl.pending, f.ID)
		}
		last := len(cl.pending) == 0
		c.mu.Unlock()
		if p == nil {
			return nil // the caller gave up, or goaway refused it
		}
		if !own {
			// body is the reader's, reused for the next frame: the
			// answer gets a copy, in the caller's room when it fits.
			kept := p.room
			if len(body) > cap(kept) {
				kept = make([]byte, 0, len(body))
			}
			kept = append(kept[:0], body...)
			p.resp = *f
			p.resp.Pattern = rebase(f.Pattern, body, kept)
			p.resp.Payload = nil
			if n := len(f.Payload); n > 0 {
				p.resp.Payload = rebaseBytes(f.Payload, body, kept)
			}
			p.resp.Meta = nil
			if n := len(f.Meta); n > 0 {
				if n > cap(p.meta) {
					p.meta = make([]wire.Meta, 0, n)
				}
				p.resp.Meta = p.meta[:n]
				for i, m := range f.Meta {
					p.resp.Meta[i] = wire.Meta{Key: rebase(m.Key, body, kept), Value: rebase(m.Value, body, kept)}
				}
			}
		} else {
			p.resp = *f
			p.resp.Meta = nil
			if n := len(f.Meta); n > 0 {
				if n > cap(p.meta) {
					p.meta = make([]wire.Meta, 0, n)
				}
				p.resp.Meta = append(p.meta[:0], f.Meta...) // f.Meta is the reader's, reused
			}
		}
		p.ch <- struct{}{}
		if last && c.br.Buffered() == 0 {
			// The last call waiting, and nothing more to read but from
			// the socket: let its caller run first, rather than after a
			// read that finds nothing yet (a system call) and the
			// reader's park. With other calls waiting the reader reads
			// on, for their answers.
			runtime.Gosched()
		}
	case wire.TypePing:
		c.pushControl(wire.TypePong, f.ID)
	case wire.TypePong:
		c.pong(f.ID)
	case wire.TypeGoAway:
		cl.goAway(f.ID)
	case wire.TypeStreamData, wire.TypeStreamHeader, wire.TypeStreamEnd, wire.TypeStreamCredit:
		return cl.dispatchStream(f, own)
	default:
		return protocolError("server sent a %v frame", f.Type)
	}
	return nil
}

// goAway records the server's goaway: requests above lastID will not be
// served, so their calls fail with ErrGoingAway; calls at or below it
// finish as usual.
func (cl *Client) goAway(lastID uint64) {
	c := cl.c
	var refused []*call
	c.mu.Lock()
	if !cl.goaway || lastID < cl.lastID {
		cl.goaway, cl.lastID = true, lastID
	}
	for id, p := range cl.pending {
		if id > cl.lastID {
			delete(cl.pending, id)
			refused = append(refused, p)
		}
	}
	var streams []*ClientStream
	for id, cs := range cl.streams {
		if id > cl.lastID {
			delete(cl.streams, id)
			streams = append(streams, cs)
		}
	}
	c.mu.Unlock()
	cl.failStreams(streams, func(uint64) error { return ErrGoingAway })
	cl.goingAway.Store(true)
	c.log.Debug("wizard: server is going away", "last_id", lastID, "refused", len(refused))
	for _, p := range refused {
		p.err = ErrGoingAway
		p.ch <- struct{}{}
	}
}

// GoAway reports whether the server said goaway: new calls fail with
// [ErrGoingAway] while calls in flight finish.
func (cl *Client) GoAway() bool { return cl.goingAway.Load() }

// Close closes the connection at once: calls in flight fail (with
// [ErrNotSent] or [ErrConnLost], wrapping [ErrClosed]). It waits for the
// connection's goroutines to stop. Close is idempotent and returns nil.
func (cl *Client) Close() error {
	cl.c.fail(ErrClosed)
	cl.c.wg.Wait()
	return nil
}

// Done is closed when the connection has ended, by [Client.Close] or by
// failing.
func (cl *Client) Done() <-chan struct{} { return cl.c.done }

// Err returns why the connection ended ([ErrClosed] after Close), or nil
// while it is open.
func (cl *Client) Err() error {
	select {
	case <-cl.c.done:
		return cl.c.err
	default:
		return nil
	}
}
