package transporttest_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/transporttest"
)

// TestMemory runs the suite against mem, a transport that carries
// messages between nodes of one process through memory, written as a
// transport outside this module would be: with the runtime's public API
// alone.
func TestMemory(t *testing.T) {
	transporttest.Run(t, func(t testing.TB, log *slog.Logger) runtime.Transport {
		return &memTransport{net: &network, log: log}
	})
}

// network holds the listeners of every mem transport of the test binary,
// by address.
var network = memNet{listeners: map[string]*memListener{}}

type memNet struct {
	mu        sync.Mutex
	port      int // the last port given for port 0
	listeners map[string]*memListener
}

// memTransport is a runtime.Transport whose connections are function
// calls: a call's message is copied to the listener's Server, its reply
// copied back, and the caller's deadline and cancellation reach the
// handler through its context.
type memTransport struct {
	net *memNet
	log *slog.Logger
}

var _ runtime.Transport = (*memTransport)(nil)

func (t *memTransport) Name() string { return "mem" }

// Listen binds addr ("host:port"; port 0 picks one).
func (t *memTransport) Listen(addr string, s runtime.Server) (runtime.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("mem: listen %s: %w", addr, err)
	}
	n := t.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if port == "0" {
		n.port++
		port = strconv.Itoa(n.port)
	}
	addr = net.JoinHostPort(host, port)
	if n.listeners[addr] != nil {
		return nil, fmt.Errorf("mem: listen %s: address in use", addr)
	}
	ctx, kill := context.WithCancel(context.Background())
	l := &memListener{net: n, addr: addr, s: s, ctx: ctx, kill: kill, conns: map[*memConn]struct{}{}}
	if lim, ok := s.(runtime.InFlightLimiter); ok && lim.MaxInFlight() > 0 {
		l.share = lim.MaxInFlight() - (lim.MaxInFlight()+7)/8
	}
	n.listeners[addr] = l
	return l, nil
}

// Dial connects to the listener at addr; without one, the call is not
// sent.
func (t *memTransport) Dial(ctx context.Context, addr string) (runtime.Conn, error) {
	t.net.mu.Lock()
	l := t.net.listeners[addr]
	t.net.mu.Unlock()
	if l == nil {
		return nil, fmt.Errorf("mem: dial %s: %w: nobody listens", addr, runtime.ErrNotSent)
	}
	c := &memConn{l: l, log: t.log, done: make(chan struct{})}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.goAway {
		return nil, fmt.Errorf("mem: dial %s: %w: shutting down", addr, runtime.ErrNotSent)
	}
	l.dials++
	c.remote = runtime.NewRemote("mem", "caller:"+strconv.Itoa(l.dials), nil)
	l.conns[c] = struct{}{}
	return c, nil
}

// memListener serves the calls of its connections with s.
type memListener struct {
	net  *memNet
	addr string
	s    runtime.Server
	ctx  context.Context // ends when the listener closes at once
	kill context.CancelFunc

	mu     sync.Mutex
	conns  map[*memConn]struct{}
	goAway bool // shutting down: no new connections or calls
	dials  int
	share  int            // the node's in-flight limit less a reserve, shared among busy connections; 0: none
	calls  sync.WaitGroup // the calls being served
}

func (l *memListener) Addr() string { return l.addr }

// Shutdown takes no new calls, ends each connection once its calls are
// answered, and waits for them until ctx is done.
func (l *memListener) Shutdown(ctx context.Context) error {
	l.stop()
	drained := make(chan struct{})
	go func() {
		l.calls.Wait()
		close(drained)
	}()
	select {
	case <-drained:
		l.Close()
		return nil
	case <-ctx.Done():
		l.Close()
		return ctx.Err()
	}
}

// Close ends every connection and the contexts of the calls running.
func (l *memListener) Close() error {
	l.stop()
	l.kill()
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		c.closeLocked()
	}
	return nil
}

// stop frees the address and says goaway: connections without calls in
// flight end at once, the others once they are answered.
func (l *memListener) stop() {
	l.net.mu.Lock()
	if l.net.listeners[l.addr] == l {
		delete(l.net.listeners, l.addr)
	}
	l.net.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.goAway {
		return
	}
	l.goAway = true
	for c := range l.conns {
		c.log.Debug("mem: server is going away", "addr", l.addr)
		if c.open == 0 {
			c.closeLocked()
		}
	}
}

// memConn is a connection to a memListener.
type memConn struct {
	l      *memListener
	log    *slog.Logger // the dialing transport's
	remote *runtime.Remote
	done   chan struct{} // closed when the connection ends

	// Guarded by l.mu.
	inFlight int       // calls holding the connection's in-flight share
	open     int       // calls begun and not finished: answers not yet delivered
	idleAt   time.Time // when inFlight last fell to 0
	closed   bool
}

var _ runtime.GoAwayConn = (*memConn)(nil)

func (c *memConn) Call(ctx context.Context, m *runtime.Message) (*runtime.Message, error) {
	req, refused, err := c.begin(m)
	if req == nil { // not sent, refused, or a no-reply call dropped
		return refused, err
	}
	sctx, cancel := c.serveContext(ctx, req)
	if m.Flags&runtime.FlagNoReply != 0 {
		go func() {
			defer c.end()
			defer cancel()
			c.l.s.ServeMessage(sctx, req)
		}()
		return nil, nil
	}
	replies := make(chan *runtime.Message, 1)
	go func() {
		defer c.finish()
		r := clone(c.l.s.ServeMessage(sctx, req))
		cancel()
		// The call leaves the connection's count before its answer can
		// reach the caller, whose next call must find its share free.
		c.release()
		if c.l.ctx.Err() != nil {
			return // the listener closed at once: the answer is lost with its connection
		}
		replies <- r
	}()
	select {
	case r := <-replies:
		return r, nil
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	case <-c.done:
		// The call's own finish may be what ended the connection (the
		// last answer after a goaway): its answer is in replies already,
		// and select picks among ready cases at random.
		select {
		case r := <-replies:
			return r, nil
		default:
		}
		return nil, fmt.Errorf("mem: %s: connection lost after the call was sent", c.l.addr)
	}
}

// begin counts a call in flight and returns the listener's copy of m.
// When the connection takes no more calls it returns an error matching
// runtime.ErrNotSent; when it holds its share of the node's in-flight
// limit, the reply that refuses the call, as the node refuses calls over
// its limit.
func (c *memConn) begin(m *runtime.Message) (req, refused *runtime.Message, err error) {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.closed || l.goAway {
		return nil, nil, fmt.Errorf("mem: %s: %w: connection closed", l.addr, runtime.ErrNotSent)
	}
	if l.share > 0 {
		if c.inFlight >= max(1, l.share/l.busyLocked(c)) {
			if m.Flags&runtime.FlagNoReply != 0 {
				return nil, nil, nil
			}
			return nil, &runtime.Message{Code: runtime.CodeResourceExhausted, Flags: runtime.FlagRefused, Error: "mem: node is over its in-flight limit for this connection"}, nil
		}
	}
	c.inFlight++
	c.open++
	l.calls.Add(1)
	req = clone(m)
	req.Remote = c.remote
	return req, nil, nil
}

// shareLinger is how long a connection counts as busy, for its part of
// the in-flight limit, after its last call was answered: a caller between
// two calls keeps its part.
const shareLinger = time.Second

// busyLocked counts the connections that share the in-flight limit: c,
// and those with calls in flight or answered within shareLinger.
func (l *memListener) busyLocked(c *memConn) int {
	n, now := 0, time.Now()
	for o := range l.conns {
		if o == c || o.inFlight > 0 || now.Sub(o.idleAt) < shareLinger {
			n++
		}
	}
	return n
}

// end counts a call answered: [memConn.release], then
// [memConn.finish].
func (c *memConn) end() {
	c.release()
	c.finish()
}

// release takes a call out of the connection's count, its part of the
// in-flight share.
func (c *memConn) release() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.inFlight--
	if c.inFlight == 0 {
		c.idleAt = time.Now()
	}
}

// finish retires a released call once its answer is delivered; the last
// one after a goaway ends the connection.
func (c *memConn) finish() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.open--
	if c.open == 0 && c.l.goAway {
		c.closeLocked()
	}
	c.l.calls.Done()
}

// serveContext is the handler's context of req: the caller's deadline,
// ended when the listener closes at once, when the caller cancels a call
// that waits for its answer, and, unless the call may run on (FlagKeep),
// when the connection ends.
func (c *memConn) serveContext(ctx context.Context, req *runtime.Message) (context.Context, context.CancelFunc) {
	sctx, cancel := context.WithCancel(c.l.ctx)
	if dl, ok := ctx.Deadline(); ok {
		req.Deadline = max(time.Until(dl), time.Nanosecond)
		sctx, cancel = context.WithDeadline(c.l.ctx, dl)
	}
	stop := func() bool { return false }
	if req.Flags&runtime.FlagNoReply == 0 {
		stop = context.AfterFunc(ctx, cancel)
	}
	if req.Flags&runtime.FlagKeep == 0 {
		go func() {
			select {
			case <-c.done:
				cancel()
			case <-sctx.Done():
			}
		}()
	}
	return sctx, func() { stop(); cancel() }
}

func (c *memConn) Done() <-chan struct{} { return c.done }

// GoAway reports whether the listener is shutting down.
func (c *memConn) GoAway() bool {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	return c.l.goAway
}

func (c *memConn) Close() error {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.closeLocked()
	return nil
}

func (c *memConn) closeLocked() {
	if !c.closed {
		c.closed = true
		close(c.done)
		delete(c.l.conns, c)
	}
}

// clone copies what a message carries over a network: nothing of m is
// shared with the copy.
func clone(m *runtime.Message) *runtime.Message {
	if m == nil {
		return nil
	}
	return &runtime.Message{
		Pattern: m.Pattern,
		Flags:   m.Flags,
		Codec:   m.Codec,
		Meta:    slices.Clone(m.Meta),
		Payload: bytes.Clone(m.Payload),
		Code:    m.Code,
		Error:   m.Error,
	}
}
