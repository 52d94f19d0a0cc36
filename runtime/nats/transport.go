package nats

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/bridge"
	"github.com/wizardmesh/wizard/runtime/internal/mux"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// The defaults.
const (
	defaultPrefix     = "wizard.node"
	defaultMaxServing = 4096
	// busyPing and busyPingTimeout are how soon a caller with calls
	// waiting pings a silent node, and how long it waits for the pong.
	busyPing, busyPingTimeout = 250 * time.Millisecond, time.Second
	// dialTimeout bounds a Dial's first ping.
	dialTimeout = 10 * time.Second
	// The streams' keep-alive (see WithStreamKeepAlive) and the streams
	// a listener serves at once per caller (see WithMaxStreams).
	defaultStreamKeepAlive, defaultStreamKeepAliveTimeout = time.Second, 2 * time.Second
	defaultMaxStreams                                     = mux.DefaultMaxStreams
)

// Transport carries calls over a NATS broker. Create it with [New]. Its
// listeners and connections share one connection to the broker, opened
// when the first of them opens and closed with the last.
type Transport struct {
	urls             string
	nopts, extra     []natsgo.Option
	authBy           string
	reconnectWait    time.Duration
	maxReconnects    int
	prefix           string
	log              *slog.Logger
	maxFrame         int
	keepAlive        time.Duration
	keepAliveTimeout time.Duration
	serveTimeout     time.Duration
	maxServing       int
	// The streams': keep-alive interval and timeout, and the most a
	// listener serves at once per caller.
	streamKeepAlive, streamKeepAliveTimeout time.Duration
	maxStreams                              int
	streamWindow                            int
	autoWindow                              bool // streamWindow is the default, which grows

	mu sync.Mutex
	b  *broker // nil until a listener or connection needs it
}

var _ runtime.Transport = (*Transport)(nil)

// New returns a NATS transport. It fails on a nil option and on an
// option's invalid argument, with an error that names the option. It does
// not connect: the first Listen or Dial does.
func New(opts ...Option) (*Transport, error) {
	t := &Transport{urls: natsgo.DefaultURL, prefix: defaultPrefix}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("wizard: nats: option %d of %d is nil", i+1, len(opts))
		}
		if err := o.apply(t); err != nil {
			return nil, fmt.Errorf("wizard: nats: %w", err)
		}
	}
	t.maxFrame = cmp.Or(t.maxFrame, wire.DefaultMaxFrameSize)
	t.serveTimeout = cmp.Or(t.serveTimeout, mux.DefaultServeTimeout)
	t.keepAlive = cmp.Or(t.keepAlive, mux.DefaultKeepAlive)
	t.keepAliveTimeout = cmp.Or(t.keepAliveTimeout, mux.DefaultKeepAliveTimeout)
	t.maxServing = cmp.Or(t.maxServing, defaultMaxServing)
	t.streamKeepAlive = cmp.Or(t.streamKeepAlive, defaultStreamKeepAlive)
	t.streamKeepAliveTimeout = cmp.Or(t.streamKeepAliveTimeout, defaultStreamKeepAliveTimeout)
	t.maxStreams = cmp.Or(t.maxStreams, defaultMaxStreams)
	t.autoWindow = t.streamWindow == 0
	t.streamWindow = cmp.Or(t.streamWindow, mux.DefaultStreamWindow)
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	return t, nil
}

// Name returns "nats".
func (t *Transport) Name() string { return "nats" }

// Listen serves calls sent to the subject addr with s. An empty addr, or
// a host:port address with port 0 (as runtime.WithListen gives by
// default), picks a subject of its own: the prefix ([WithSubjectPrefix])
// and a random token, "wizard.node.<random>". Any other addr must be a
// literal subject (one without wildcards or white space: "10.0.0.7:7070"
// is one, and a caller dialling it reaches the listener). Listen connects to the broker if no listener or
// connection of t has, and returns once the broker has the subscription,
// so that callers find it at once.
func (t *Transport) Listen(addr string, s runtime.Server) (runtime.Listener, error) {
	subject, err := t.listenSubject(addr)
	if err != nil {
		return nil, fmt.Errorf("wizard: nats: listen %s: %w", addr, err)
	}
	b, err := t.acquire()
	if err != nil {
		return nil, fmt.Errorf("wizard: nats: listen %s: %w", subject, err)
	}
	l, err := newListener(t, b, subject, s)
	if err != nil {
		t.release(b)
		return nil, fmt.Errorf("wizard: nats: listen %s: %w", subject, err)
	}
	return l, nil
}

// listenSubject returns the subject Listen(addr) serves.
func (t *Transport) listenSubject(addr string) (string, error) {
	if addr == "" {
		return t.prefix + "." + nuid.Next(), nil
	}
	if _, port, err := net.SplitHostPort(addr); err == nil && port == "0" {
		return t.prefix + "." + nuid.Next(), nil
	}
	return addr, checkSubject(addr)
}

// Dial returns a connection to the node listening on the subject addr,
// once it has answered a ping (within ctx and 10 seconds). Every error
// matches [runtime.ErrNotSent] and reads "wizard: nats: dial <addr>: call
// not sent: <why>", "no node listens on the subject" when the broker
// says so.
func (t *Transport) Dial(ctx context.Context, addr string) (runtime.Conn, error) {
	where := "wizard: nats: dial " + addr
	if err := checkSubject(addr); err != nil {
		return nil, bridge.NotSent(where, err)
	}
	b, err := t.acquire()
	if err != nil {
		return nil, bridge.NotSent(where, err)
	}
	since := b.nc.LastError()
	c, err := newConn(b, addr)
	if err != nil {
		t.release(b)
		return nil, bridge.NotSent(where, err)
	}
	pctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	// The control subscription first: one the broker refuses fails the
	// Dial, with the subject, before a ping waits in vain.
	if err := b.checked(pctx, since, opSubscribe, controlSubject(addr)); err != nil {
		c.Close()
		return nil, bridge.NotSent(where, err)
	}
	if err := c.ping(pctx); err != nil {
		c.Close()
		return nil, bridge.NotSent(where, err)
	}
	go c.keepAlive()
	return c, nil
}

// acquire returns the transport's broker connection, connecting first
// if no listener or connection holds it.
func (t *Transport) acquire() (*broker, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.b != nil {
		t.b.refs++
		return t.b, nil
	}
	b, err := connect(t)
	if err != nil {
		return nil, err
	}
	b.refs = 1
	t.b = b
	return b, nil
}

// release gives back a reference acquire returned; the last one closes
// the broker connection.
func (t *Transport) release(b *broker) {
	t.mu.Lock()
	b.refs--
	last := b.refs == 0
	if last && t.b == b {
		t.b = nil
	}
	t.mu.Unlock()
	if last {
		b.close()
	}
}
