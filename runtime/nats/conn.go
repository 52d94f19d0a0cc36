package nats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/bridge"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// Conn is a caller's connection to one node: the node's subject, over
// the transport's broker connection. It ends when the node goes away
// (says so, or stops answering pings), when the broker connection is
// lost, or when it is closed.
type Conn struct {
	b       *broker
	subject string
	where   string // "wizard: nats: <subject>", to start its errors
	ctl     *natsgo.Subscription
	quiet   atomic.Int64 // when the node was last heard from, Unix nanoseconds
	batch   atomic.Bool  // the node reads batches (its last pong said so)
	streams atomic.Bool  // the node serves streams (its last pong said so)
	out     *batcher     // the calls' requests and cancels, batched
	grown   atomic.Int64 // what its streams grew their receive windows by

	mu       sync.Mutex
	inflight int // calls and streams
	nstreams int // streams
	goaway   bool
	ended    bool
	reason   error
	done     chan struct{}
	released bool
}

var _ runtime.GoAwayConn = (*Conn)(nil)

// GoAway reports whether the node said goaway to c.
func (c *Conn) GoAway() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.goaway
}

// newConn makes a connection to subject and subscribes to its control
// subject, on which the node says it is going away.
func newConn(b *broker, subject string) (*Conn, error) {
	c := &Conn{b: b, subject: subject, where: "wizard: nats: " + subject, done: make(chan struct{})}
	c.heard()
	c.out = &batcher{nc: b.nc, subject: subject, reply: b.inbox + batchToken, limit: &b.batch, failed: b.notSent}
	var err error
	c.ctl, err = b.nc.Subscribe(controlSubject(subject), c.onControl)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.conns[c] = struct{}{}
	b.mu.Unlock()
	if !b.nc.IsConnected() {
		// Undone without Close: the caller gives back its reference to
		// b, and only that one (a second release would close the broker
		// connection under its other holders).
		err := errors.New("the broker connection is down")
		c.fail(err)
		_ = c.ctl.Unsubscribe()
		return nil, err
	}
	return c, nil
}

// controlSubject is where the node listening on subject says it is going
// away or gone.
func controlSubject(subject string) string { return subject + ".ctl" }

func (c *Conn) heard() { c.quiet.Store(time.Now().UnixNano()) }

// onControl takes a message of the node: a goaway (drain) or an error
// frame (closed: the calls in flight are lost).
func (c *Conn) onControl(m *natsgo.Msg) {
	var f wire.Frame
	if err := decodeFrame(m.Data, wire.MinFrameSize+64, &f); err != nil {
		c.b.t.log.Warn("wizard: nats: malformed control message dropped", "subject", m.Subject, "err", err)
		return
	}
	switch f.Type {
	case wire.TypeGoAway:
		c.goAway()
	case wire.TypeError:
		c.fail(errors.New("the node closed"))
	}
}

// goAway records the node's goaway: new calls are refused, the
// connection ends once the calls in flight are answered.
func (c *Conn) goAway() {
	c.mu.Lock()
	first := !c.goaway && !c.ended
	c.goaway = true
	end := c.inflight == 0
	c.mu.Unlock()
	if first {
		c.b.t.log.Debug("wizard: nats: server is going away", "subject", c.subject)
	}
	if end {
		c.fail(errors.New("the node went away"))
	}
}

// fail ends the connection with reason; its pending calls fail as lost
// after being sent.
func (c *Conn) fail(reason error) {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.ended, c.reason = true, reason
	close(c.done)
	c.mu.Unlock()
	b := c.b
	b.mu.Lock()
	var mine []*pending
	for id, p := range b.pending {
		if p.conn == c {
			mine = append(mine, p)
			delete(b.pending, id)
		}
	}
	var streams []*clientStream
	for id, cs := range b.streams {
		if cs.c == c {
			streams = append(streams, cs)
			delete(b.streams, id)
		}
	}
	delete(b.conns, c)
	b.mu.Unlock()
	for _, p := range mine {
		p.ch <- answer{err: lostError{reason}}
	}
	for _, cs := range streams {
		cs.lost(bridge.Lost(c.where, reason))
	}
}

// begin counts a call in flight, or returns why it cannot be sent.
func (c *Conn) begin() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.goaway:
		return bridge.NotSent(c.where, errors.New("server is going away"))
	case c.ended:
		return bridge.NotSent(c.where, c.reason)
	}
	c.inflight++
	return nil
}

// end counts a call answered; the last one of a node going away ends the
// connection.
func (c *Conn) end() {
	c.mu.Lock()
	c.inflight--
	last := c.goaway && c.inflight == 0
	c.mu.Unlock()
	if last {
		c.fail(errors.New("the node went away"))
	}
}

// Call sends m and waits for the reply. An error of the connection reads
// "wizard: nats: <subject>: call not sent: <why>" (and matches
// [runtime.ErrNotSent]) or "wizard: nats: <subject>: connection lost
// after the call was sent: <why>".
func (c *Conn) Call(ctx context.Context, m *runtime.Message) (*runtime.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var f wire.Frame
	bridge.RequestFrame(&f, m)
	if dl, ok := ctx.Deadline(); ok {
		d := time.Until(dl)
		if d <= 0 {
			return nil, context.DeadlineExceeded
		}
		f.Deadline = d
	}
	if size, max := f.Size()-4, c.b.maxFrame(); size > max {
		return nil, runtime.NewError(runtime.CodeResourceExhausted, fmt.Sprintf("%s: request of %d bytes: frame too large (limit %d)", c.where, size, max))
	}
	if err := c.begin(); err != nil {
		return nil, err
	}
	defer c.end()
	if m.Flags&runtime.FlagNoReply == 0 && c.batch.Load() {
		p := getPending(c)
		defer putPending(p) // callBatched takes p's one answer, or makes sure none comes
		return c.callBatched(ctx, p, &f)
	}
	fb := encodePooled(&f)
	if m.Flags&runtime.FlagNoReply != 0 {
		err := c.b.nc.Publish(c.subject, fb.b)
		fb.free()
		if err != nil {
			return nil, bridge.NotSent(c.where, err)
		}
		return nil, nil
	}
	p := getPending(c)
	defer putPending(p) // every path below has taken p's one answer, or made sure none comes
	id, reply := c.b.register(p)
	err := c.b.nc.PublishRequest(c.subject, reply, fb.b)
	fb.free()
	if err != nil {
		if c.b.unregister(id) {
			return nil, bridge.NotSent(c.where, err)
		}
		<-p.ch // the broker connection failed meanwhile and answered it
		return nil, bridge.NotSent(c.where, err)
	}
	var a answer
	select {
	case a = <-p.ch:
	case <-ctx.Done():
		if c.b.unregister(id) {
			// Tell the node, which cancels the handler's ctx.
			_ = c.b.nc.PublishRequest(c.subject, reply, encodeFrame(&wire.Frame{Type: wire.TypeCancel}))
			return nil, ctx.Err()
		}
		a = <-p.ch // the answer won the race
	}
	return c.reply(&a)
}

// callBatched sends f, a request, in the next batch to the node and
// waits for its reply: the frame names the call by its id.
func (c *Conn) callBatched(ctx context.Context, p *pending, f *wire.Frame) (*runtime.Message, error) {
	id := c.b.add(p)
	f.ID = id
	c.out.active.Add(1)
	defer c.out.active.Add(-1)
	c.out.send(f, id)
	var a answer
	select {
	case a = <-p.ch:
	case <-ctx.Done():
		if c.b.unregister(id) {
			// Tell the node, which cancels the handler's ctx; it follows
			// the request, in its batch or a later one.
			c.out.send(&wire.Frame{Type: wire.TypeCancel, ID: id}, 0)
			return nil, ctx.Err()
		}
		a = <-p.ch // the answer won the race
	}
	return c.reply(&a)
}

// reply makes the node's reply, or the call's error, of an answer.
func (c *Conn) reply(a *answer) (*runtime.Message, error) {
	if a.err != nil {
		var le lostError
		if errors.As(a.err, &le) {
			return nil, bridge.Lost(c.where, le.reason)
		}
		var ns notSentError
		if errors.As(a.err, &ns) {
			return nil, bridge.NotSent(c.where, ns.reason)
		}
		if errors.Is(a.err, errNoResponders) {
			return nil, bridge.NotSent(c.where, a.err)
		}
		return nil, fmt.Errorf("%s: %w", c.where, a.err)
	}
	if a.f.Type != wire.TypeResponse && a.f.Type != wire.TypeError {
		return nil, fmt.Errorf("%s: a %v frame in reply to a call", c.where, a.f.Type)
	}
	m := new(runtime.Message)
	if err := bridge.ReplyMessage(m, &a.f); err != nil {
		return nil, fmt.Errorf("%s: bad error reply: %w", c.where, err)
	}
	if m.Flags&runtime.FlagRefused != 0 && m.Code == runtime.CodeUnavailable {
		// Refused unrun as unavailable: the node is going away (its
		// listener drains, or the node closes). Its goaway on the
		// control subject may come after this answer (another
		// subscription, no order between them): take the news from the
		// answer, so that the next call is not sent either.
		c.goAway()
		return nil, bridge.NotSent(c.where, errors.New(m.Error))
	}
	return m, nil
}

// errNoPong is a ping's error when no answer came in time.
var errNoPong = errors.New("the node did not answer a ping in time")

// ping asks the node for a pong within ctx. No one listening, or no
// answer in time, fails it; a goaway answer is an answer (the node
// drains: no new call is sent, those in flight wait for theirs).
func (c *Conn) ping(ctx context.Context) error {
	p := &pending{ch: make(chan answer, 1), conn: c}
	id, reply := c.b.register(p)
	if err := c.b.nc.PublishRequest(c.subject, reply, encodeFrame(&wire.Frame{Type: wire.TypePing})); err != nil {
		if !c.b.unregister(id) {
			<-p.ch
		}
		return err
	}
	var a answer
	select {
	case a = <-p.ch:
	case <-ctx.Done():
		if c.b.unregister(id) {
			// A node the broker does not let publish to the caller's
			// inbox is silent too, and only its own log can say why.
			return fmt.Errorf("%w (stuck, or not allowed to publish to %s>)", errNoPong, c.b.inbox)
		}
		a = <-p.ch
	}
	switch {
	case a.err != nil:
		return a.err
	case a.f.Type == wire.TypeGoAway:
		// The node is alive and draining: the calls it took still get
		// their answers, and goAway ends the connection after the last.
		c.goAway()
		return nil
	case a.f.Type != wire.TypePong:
		return fmt.Errorf("a %v frame in reply to a ping", a.f.Type)
	}
	c.batch.Store(a.f.ID == batchVersion)
	c.streams.Store(len(a.f.Payload) > 0 && wire.Features(a.f.Payload[0]).Has(wire.FeatureStreams))
	return nil
}

// keepAlive pings the node while it is silent: after the keep-alive
// interval when no call waits, after 250ms when some do; a node that does
// not answer in time, or that no one listens for, ends the connection.
// While streams are open it pings a node silent for the stream
// keep-alive interval, and gives it the stream keep-alive timeout (see
// [WithStreamKeepAlive]), unless calls make it look closer.
func (c *Conn) keepAlive() {
	t := c.b.t
	if t.keepAlive < 0 && t.streamKeepAlive < 0 {
		return
	}
	tick := busyPing
	if t.keepAlive > 0 {
		tick = min(tick, t.keepAlive)
	}
	streamTick := tick // while streams are open
	if t.streamKeepAlive > 0 {
		streamTick = min(tick, t.streamKeepAlive/4)
	}
	timer := time.NewTimer(tick)
	defer timer.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-timer.C:
		}
		c.mu.Lock()
		calls, streams := c.inflight-c.nstreams, c.nstreams
		c.mu.Unlock()
		quiet := time.Since(time.Unix(0, c.quiet.Load()))
		due, timeout := false, time.Duration(0)
		if t.keepAlive >= 0 {
			wait := t.keepAlive
			timeout = t.keepAliveTimeout
			if calls > 0 {
				wait, timeout = min(busyPing, wait), min(busyPingTimeout, timeout)
			}
			due = quiet >= wait
		}
		if streams > 0 && t.streamKeepAlive > 0 && quiet >= t.streamKeepAlive {
			if !due || t.streamKeepAliveTimeout < timeout {
				timeout = t.streamKeepAliveTimeout
			}
			due = true
		}
		if due {
			asked := time.Now().UnixNano()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			err := c.ping(ctx)
			cancel()
			if errors.Is(err, errNoPong) && c.quiet.Load() >= asked {
				// Heard from while its pong was late: the node is
				// behind (its answers, stream messages and pong reach
				// this caller in order, on one inbox), not gone. The
				// next tick pings it again.
				err = nil
			}
			if err != nil {
				c.fail(err)
				return
			}
		}
		if streams > 0 {
			timer.Reset(streamTick)
		} else {
			timer.Reset(tick)
		}
	}
}

// Done is closed when the connection is gone.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Close closes the connection; calls in flight fail.
func (c *Conn) Close() error {
	c.fail(errors.New("connection closed"))
	c.mu.Lock()
	rel := !c.released
	c.released = true
	c.mu.Unlock()
	if rel {
		_ = c.ctl.Unsubscribe()
		c.b.t.release(c.b)
	}
	return nil
}
