package mux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// conn is what the client and server sides share: the byte stream, the
// write queue drained by one writer goroutine, keep-alive, and the
// connection's end.
type conn struct {
	grown atomic.Int64 // what its streams' windows grew by, together (flow.Budget)

	rw   io.ReadWriteCloser
	br   *reader // the reader role's (streambuffer.go)
	bw   writer  // the writer goroutine's
	opts Options
	log  *slog.Logger

	// mu guards the write queue and, on each side, that side's call
	// tables (the client's pending calls, the server's in-flight requests).
	mu      sync.Mutex
	q       []outFrame    // frames waiting for the writer, in stream order
	space   chan struct{} // closed when the queue shrinks; nil when no one waits
	quit    bool          // the writer flushes the queue and stops
	wclosed bool          // the writer stopped: frames pushed now are never sent
	queued  int           // bytes (buffer capacity) of frames pushed and not yet written
	paused  bool          // the server's reader waits on room (see server.waitRoom)
	wIdle   bool          // the writer waits for frames, all it took flushed (see direct.go)
	direct  bool          // a frame is being written past the writer (see direct.go)

	wake chan struct{} // tells an idle writer that the queue has frames (cap 1)
	room chan struct{} // wakes the paused reader (cap 1)

	// drained, if set (by the server), is called with mu held when the
	// writer has brought queued below MaxQueued (see full).
	drained func()

	// holds counts the times the server's reader paused because the
	// requests waiting for its handlers reached their bound, and resumed:
	// odd while it is paused so. Keep-alive excuses a late pong then (see
	// keepAlive).
	holds atomic.Uint64
	// pingSent is the id of the last ping flushed to the stream.
	pingSent atomic.Uint64
	// read is set by the reader when a frame came, cleared by keep-alive
	// when it pings: the peer was alive meanwhile.
	read atomic.Bool

	// The writer goroutine's own.
	spare    []outFrame     // spare queue slice
	cw       countingWriter // under bw: counts the bytes the stream took
	buffered int64          // bytes handed to bw
	unsure   []sentMark     // requests in bw since the last good flush

	// The client's sending past the writer (send.go): tw writes to the
	// socket without waiting (nil when it cannot); sendQ and sendBuf are
	// the batch and the bytes of the caller that holds direct.
	tw      *tryWriter
	sendQ   []outFrame
	sendBuf []byte

	// written is the id of the last request frame of which at least one
	// byte may have reached the stream. Ids increase along the stream, so
	// requests with a higher id have surely not been sent. The writer
	// updates it after every flush and when it stops.
	written atomic.Uint64

	ka keeper // keep-alive (keepalive.go)

	// The client side's: pendingCalls counts its calls waiting for an
	// answer (called with mu held); armed says that a call that starts
	// waiting tells keep-alive (see busyLocked; guarded by mu).
	pendingCalls func() int
	// stalled, the client side's, gives up its idempotent calls when
	// keep-alive finds the peer stalled (see [Client.abandonStalled]);
	// called with c.ka.mu held.
	stalled func()
	armed   bool

	failOnce   sync.Once
	ended      bool          // fail ran; guarded by mu
	onEnd      func()        // run on a goroutine of its own once fail ran (see ServeDetached); guarded by mu
	err        error         // why the connection ended; set before done closes
	done       chan struct{} // closed when the connection ends
	writerDone chan struct{}
	wg         sync.WaitGroup // reader, writer, keep-alive
}

// sentMark records where a request frame starts in the stream.
type sentMark struct {
	id     uint64
	offset int64
}

// countingWriter counts the bytes its writer took, even from failed
// writes.
type countingWriter struct {
	w   io.Writer
	n   int64
	two [2][]byte   // writeTwo's (streambuffer.go)
	vec net.Buffers // over two
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.n += int64(n)
	return n, err
}

// outFrame is an encoded frame in the write queue.
type outFrame struct {
	buf  *[]byte
	id   uint64 // a request's id, for [conn.written]; 0 for other frames
	ping uint64 // a ping's id, for [conn.pingSent]; 0 for other frames
}

func newConn(rw io.ReadWriteCloser, br *reader, opts Options, side string) *conn {
	log := connLogger(opts.Logger, rw, side)
	c := &conn{
		rw:         rw,
		br:         br,
		opts:       opts,
		log:        log,
		wake:       make(chan struct{}, 1),
		room:       make(chan struct{}, 1),
		armed:      true,
		done:       make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	c.cw.w = rw
	c.bw.w = &c.cw
	return c
}

// addrStream is a stream that knows its peer's address (a net.Conn): a
// connection over one names the peer in its log; over any other stream
// (a pipe, a QUIC stream) the log names no peer.
type addrStream interface{ RemoteAddr() net.Addr }

// connLogger returns l with the side of the connection over rw and, when
// rw knows it, the peer's address.
func connLogger(l *slog.Logger, rw io.ReadWriteCloser, side string) *slog.Logger {
	l = l.With(slog.String("side", side))
	if a, ok := rw.(addrStream); ok && a.RemoteAddr() != nil {
		l = l.With(slog.String("remote", a.RemoteAddr().String()))
	}
	return l
}

// start runs the writer and keep-alive goroutines and, with read, the
// reader goroutine.
func (c *conn) start(read func()) {
	c.wg.Add(2)
	go c.writeLoop()
	go func() {
		defer c.wg.Done()
		read()
	}()
	if c.opts.KeepAlive > 0 {
		c.wg.Add(1)
		go c.keepAlive()
	}
}

// fail ends the connection for reason (the first reason wins): it closes
// done and the byte stream, which stops the reader and the writer.
func (c *conn) fail(reason error) {
	c.failOnce.Do(func() {
		c.stopKeepAlive()
		c.err = reason
		close(c.done)
		c.rw.Close()
		c.mu.Lock()
		c.ended = true
		end := c.onEnd
		c.mu.Unlock()
		if end != nil {
			go end()
		}
		level := slog.LevelWarn
		if errors.Is(reason, io.EOF) || errors.Is(reason, ErrClosed) || errors.Is(reason, errShutdown) {
			level = slog.LevelDebug
		}
		c.log.LogAttrs(context.Background(), level, "wizard: connection closed", slog.Any("reason", reason))
	})
}

// reason returns why the connection ended; call it only after done closed.
func (c *conn) reason() error {
	<-c.done
	return c.err
}

// lockSpace locks c.mu once the write queue has room. It returns nil with
// c.mu held, or an error with c.mu unlocked: ctx's error, or errNoWriter
// when the writer has stopped.
func (c *conn) lockSpace(ctx context.Context) error {
	c.mu.Lock()
	for {
		if c.wclosed {
			c.mu.Unlock()
			return errNoWriter
		}
		if len(c.q) < c.opts.WriteQueue {
			return nil
		}
		if c.space == nil {
			c.space = make(chan struct{})
		}
		space := c.space
		c.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return errNoWriter
		}
		c.mu.Lock()
	}
}

// errNoWriter is returned by lockSpace when the writer has stopped.
var errNoWriter = errors.New("wizard: mux: writer stopped")

// pushLocked appends an encoded frame to the write queue; c.mu is held.
// When the writer has stopped, the frame is dropped.
func (c *conn) pushLocked(f outFrame) {
	if c.wclosed {
		putBuffer(f.buf)
		return
	}
	if len(c.q) == 0 && !c.direct { // else writeDirect wakes the writer
		c.wakeWriter()
	}
	c.q = append(c.q, f)
	c.addQueued(cap(*f.buf))
}

// push queues an encoded frame without waiting for room, as the server
// does for its answers: the server bounds them by bytes instead (see
// [server.waitRoom]). When the writer has stopped, the frame is dropped.
func (c *conn) push(buf *[]byte) {
	c.mu.Lock()
	c.pushLocked(outFrame{buf: buf})
	c.mu.Unlock()
}

// wakeLocked wakes the reader if it is paused; c.mu is held. The reader
// checks again whether the connection is below its bounds.
func (c *conn) wakeLocked() {
	if c.paused {
		c.paused = false
		c.room <- struct{}{} // never blocks: a token is sent only while paused
	}
}

// controlFrame returns an encoded control frame.
func controlFrame(t wire.Type, id uint64) *[]byte {
	buf := getBuffer(wire.MinFrameSize + 4)
	*buf = wire.AppendFrame(*buf, &wire.Frame{Type: t, ID: id})
	return buf
}

// pushControl queues a small control frame (ping, pong, cancel, goaway)
// without waiting for room: control frames may exceed the queue's bound
// by as much again, beyond which all but goaway are dropped (a peer that
// does not read fails keep-alive anyway, and a cancel is only advice).
func (c *conn) pushControl(t wire.Type, id uint64) {
	buf := controlFrame(t, id)
	c.mu.Lock()
	if t != wire.TypeGoAway && len(c.q) >= 2*c.opts.WriteQueue {
		c.mu.Unlock()
		putBuffer(buf)
		return
	}
	f := outFrame{buf: buf}
	if t == wire.TypePing {
		f.ping = id
	}
	c.pushLocked(f)
	c.mu.Unlock()
}

// writeLoop is the writer goroutine: it takes the whole queue at once,
// writes it into the buffered writer and flushes only when the queue is
// empty, so that frames queued together leave in one write.
func (c *conn) writeLoop() {
	defer c.wg.Done()
	defer close(c.writerDone)
	dirty := false   // bw holds frames not yet flushed
	yielded := false // the writer yielded once since its last batch
	wrote := 0       // bytes (buffer capacity) of the last batch, now in bw or the stream
	var ping uint64  // the last ping in bw, not flushed yet
	for {
		c.mu.Lock()
		if wrote > 0 {
			c.addQueued(-wrote)
			wrote = 0
			if !c.full() {
				if c.drained != nil {
					c.drained()
				}
				c.wakeLocked()
			}
		}
		for len(c.q) == 0 || c.direct {
			if dirty && !yielded {
				// Before paying for a write, let goroutines that are
				// about to queue a frame (handlers finishing, callers
				// sending) do so: they join this write.
				c.mu.Unlock()
				runtime.Gosched()
				yielded = true
				c.mu.Lock()
				continue
			}
			if dirty {
				c.mu.Unlock()
				if err := c.bw.Flush(); err != nil {
					c.stopWriter(fmt.Errorf("wizard: mux: writing: %w", err))
					return
				}
				if n := len(c.unsure); n > 0 {
					c.written.Store(c.unsure[n-1].id)
					c.unsure = c.unsure[:0]
				}
				if ping != 0 {
					c.pingSent.Store(ping)
					ping = 0
				}
				dirty = false
				c.mu.Lock()
				continue // frames may have come during the flush
			}
			if c.quit && !c.direct {
				c.wclosed = true
				c.mu.Unlock()
				return
			}
			c.wIdle = true
			c.mu.Unlock()
			select {
			case <-c.wake:
			case <-c.done:
				c.stopWriter(nil)
				return
			}
			c.mu.Lock()
			c.wIdle = false
		}
		batch := c.q
		c.q = c.spare[:0]
		if c.space != nil {
			close(c.space)
			c.space = nil
		}
		c.mu.Unlock()

		select {
		case <-c.done:
			c.stopWriter(nil)
			return
		default:
		}
		for i, f := range batch {
			if f.id != 0 {
				c.unsure = append(c.unsure, sentMark{f.id, c.buffered})
			} else if f.ping != 0 {
				ping = f.ping
			}
			c.buffered += int64(len(*f.buf))
			wrote += cap(*f.buf)
			_, err := c.bw.Write(*f.buf)
			putBuffer(f.buf)
			batch[i] = outFrame{}
			if err != nil {
				c.stopWriter(fmt.Errorf("wizard: mux: writing: %w", err))
				return
			}
		}
		c.spare = batch[:0]
		dirty, yielded = true, false
	}
}

// stopWriter marks the writer stopped, failing the connection with reason
// when it is not nil. Requests in the buffered writer count as written
// when their first byte reached the stream.
func (c *conn) stopWriter(reason error) {
	if reason != nil {
		c.fail(reason)
	}
	for _, m := range c.unsure {
		if m.offset >= c.cw.n {
			break
		}
		c.written.Store(m.id)
	}
	c.unsure = nil
	c.mu.Lock()
	c.wclosed = true
	for c.direct {
		// A frame is being written past the writer: the writer stops
		// once that write is done, so that [conn.written] is final when
		// writerDone closes. Giving the stream back wakes it.
		c.mu.Unlock()
		<-c.wake
		c.mu.Lock()
	}
	c.mu.Unlock()
}

// drainQueue releases the buffers of frames that will never be written;
// call it after the writer stopped.
func (c *conn) drainQueue() {
	c.mu.Lock()
	q := c.q
	c.q = nil
	c.mu.Unlock()
	for _, f := range q {
		putBuffer(f.buf)
	}
}

// interval is how long keep-alive waits before its next look at the
// connection: BusyKeepAlive while this side waits on the peer, else
// KeepAlive.
func (c *conn) interval() time.Duration {
	if c.waitingOnPeer() {
		return c.opts.BusyKeepAlive
	}
	return c.opts.KeepAlive
}

// waitingOnPeer reports whether this side waits for answers (the client
// has calls pending); it re-arms the signal that tells keep-alive when it
// starts waiting again.
func (c *conn) waitingOnPeer() bool {
	if c.pendingCalls == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.pendingCalls()
	c.armed = n == 0
	return n > 0
}

// readFrames reads frames until the stream fails, handing each to
// dispatch, and returns why it stopped: errPeerClosed (which wraps io.EOF)
// for a clean end of stream between frames. A frame passed to dispatch
// aliases body; when own is false body is the reader's, reused for the
// next frame, so dispatch copies what it keeps (see Client.dispatch),
// metadata included: every frame's is decoded into the same slice.
func (c *conn) readFrames(dispatch func(f *wire.Frame, body []byte, own bool) error) error {
	var f wire.Frame
	scratch := make([]byte, scratchBody)
	for {
		body, err := wire.ReadFrame(c.br, c.opts.MaxFrameSize, &f, scratch[:0])
		if err != nil {
			return readError(err, c.opts.MaxFrameSize)
		}
		if !c.read.Load() { // a load per frame, a store once per ping
			c.read.Store(true)
		}
		// A frame larger than scratch got a buffer of its own.
		own := len(body) > 0 && !sameArray(body, scratch)
		if err := dispatch(&f, body, own); err != nil {
			return err
		}
	}
}

// scratchBody is the size of the reader's reused body buffer: frames up
// to it are read into it (and copied out by whoever keeps them), larger
// ones into a buffer of their own.
const scratchBody = 4 << 10

// readError is what a read loop returns for err, ReadFrame's:
// errPeerClosed for a clean end of stream between frames.
func readError(err error, limit int) error {
	if err == io.EOF {
		return errPeerClosed
	}
	if errors.Is(err, wire.ErrFrameTooLarge) {
		return fmt.Errorf("wizard: mux: reading frame: %w (limit %d bytes)", err, limit)
	}
	return fmt.Errorf("wizard: mux: reading frame: %w", err)
}

// handshake runs fn, the handshake, bounded by the handshake timeout and
// by ctx: either closes the stream, which ends fn.
func handshake(ctx context.Context, rw io.ReadWriteCloser, timeout time.Duration, fn func() error) error {
	// state decides, once, who ends the handshake: fn finishing (done) or
	// the timer or ctx closing the stream (timedOut, cancelled). A cancel
	// that comes after fn has finished closes nothing: the caller goes on
	// and, for a server, shuts down gracefully with a goaway instead of
	// dropping a stream its client may already be writing requests on.
	const (
		running int32 = iota
		done
		timedOut
		cancelled
	)
	var state atomic.Int32
	end := func(why int32) {
		if state.CompareAndSwap(running, why) {
			rw.Close()
		}
	}
	t := time.AfterFunc(timeout, func() { end(timedOut) })
	stop := context.AfterFunc(ctx, func() { end(cancelled) })
	err := fn()
	state.CompareAndSwap(running, done)
	t.Stop()
	stop()
	switch state.Load() {
	case timedOut:
		return errHandshakeTimeout
	case cancelled:
		return ctx.Err()
	}
	return err
}
