// Package tcp is wizard's default transport: many concurrent calls
// multiplexed over one TCP connection per peer, plain, TLS or mutual TLS.
//
//	node, err := runtime.New(
//		runtime.WithTransport(tcp.New()),
//		runtime.WithListen("127.0.0.1:0"),
//		runtime.WithDiscovery(runtime.StaticPeers("10.0.0.7:7070")),
//	)
//
// Frames follow the wizard wire format (magic and version handshake, one
// frame per request, response, cancel, ping or goaway); a malformed or
// oversized frame closes that connection with a logged reason and never
// the process.
package tcp

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/bridge"
	"github.com/wizardmesh/wizard/runtime/internal/mux"
)

// Transport is the TCP transport. Create it with [New].
type Transport struct {
	serverTLS *tls.Config
	clientTLS *tls.Config
	mux       mux.Options
	dialer    net.Dialer
}

var _ runtime.Transport = (*Transport)(nil)

// Option configures a [Transport].
type Option interface{ apply(*Transport) }

type optionFunc func(*Transport)

func (f optionFunc) apply(t *Transport) { f(t) }

// WithServerTLS serves over TLS with cfg (its Certificates; set ClientAuth
// and ClientCAs for mutual TLS).
func WithServerTLS(cfg *tls.Config) Option {
	return optionFunc(func(t *Transport) { t.serverTLS = cfg })
}

// WithClientTLS dials over TLS with cfg (RootCAs; Certificates for mutual
// TLS). Without a ServerName, each peer is verified against the host part
// of its address, as [tls.Dial] does.
func WithClientTLS(cfg *tls.Config) Option {
	return optionFunc(func(t *Transport) { t.clientTLS = cfg })
}

// WithMaxFrameSize sets the largest frame read or written (default 4 MiB).
func WithMaxFrameSize(n int) Option {
	return optionFunc(func(t *Transport) { t.mux.MaxFrameSize = n })
}

// WithKeepAlive sets the ping interval and how long a peer has to answer
// before its connection is closed as dead (defaults 15s and 10s; a negative
// interval turns pings off).
func WithKeepAlive(interval, timeout time.Duration) Option {
	return optionFunc(func(t *Transport) { t.mux.KeepAlive, t.mux.KeepAliveTimeout = interval, timeout })
}

// WithLogger receives a record for each connection that closes abnormally.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(t *Transport) { t.mux.Logger = l })
}

// New returns a TCP transport.
func New(opts ...Option) *Transport {
	t := &Transport{}
	for _, o := range opts {
		if o != nil {
			o.apply(t)
		}
	}
	return t
}

// Name returns "tcp".
func (t *Transport) Name() string { return "tcp" }

// Dial connects to the node listening at addr. The handshakes (TLS, then
// wizard's) end with ctx, and within the handshake timeout.
func (t *Transport) Dial(ctx context.Context, addr string) (runtime.Conn, error) {
	tc, err := t.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: tcp: dial %s: %w", runtime.ErrNotSent, addr, err)
	}
	if c, ok := tc.(*net.TCPConn); ok {
		_ = c.SetNoDelay(true)
	}
	hctx, cancel := context.WithTimeout(ctx, cmp.Or(t.mux.HandshakeTimeout, mux.DefaultHandshakeTimeout))
	defer cancel()
	stop := context.AfterFunc(hctx, func() { tc.Close() })
	nc := tc
	if t.clientTLS != nil {
		cfg := t.clientTLS
		if cfg.ServerName == "" {
			// Verify the peer against the host dialled, as tls.Dial does.
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tlsConn := tls.Client(tc, cfg)
		if err := tlsConn.HandshakeContext(hctx); err != nil {
			stop()
			tc.Close()
			return nil, fmt.Errorf("%w: tcp: tls handshake with %s: %w", runtime.ErrNotSent, addr, err)
		}
		nc = tlsConn
	}
	cl, err := mux.NewClient(nc, t.mux)
	if !stop() { // hctx ended and closed the connection
		if err == nil {
			cl.Close()
		}
		return nil, fmt.Errorf("%w: tcp: handshake with %s: %w", runtime.ErrNotSent, addr, hctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("%w: tcp: %s: %w", runtime.ErrNotSent, addr, err)
	}
	return &Conn{cl: cl}, nil
}

// Conn is a client connection to one node.
type Conn struct {
	cl *mux.Client
}

var _ runtime.Conn = (*Conn)(nil)

// Call sends m and waits for the reply.
func (c *Conn) Call(ctx context.Context, m *runtime.Message) (*runtime.Message, error) {
	return bridge.Call(ctx, c.cl, m)
}

// Done is closed when the connection is gone.
func (c *Conn) Done() <-chan struct{} { return c.cl.Done() }

// Close closes the connection; calls in flight fail.
func (c *Conn) Close() error { return c.cl.Close() }

// Listen accepts connections on addr and serves their calls with s.
func (t *Transport) Listen(addr string, s runtime.Server) (runtime.Listener, error) {
	nl, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcp: listen %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Listener{
		t:      t,
		nl:     nl,
		h:      bridge.Handler(s),
		ctx:    ctx,
		cancel: cancel,
		conns:  map[net.Conn]struct{}{},
		done:   make(chan struct{}),
	}
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// Listener accepts connections for a node.
type Listener struct {
	t      *Transport
	nl     net.Listener
	h      mux.Handler
	ctx    context.Context // ends on Shutdown: each connection sends goaway and drains
	cancel context.CancelFunc

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup // the accept loop and every connection's Serve
	done   chan struct{}
	once   sync.Once
}

var _ runtime.Listener = (*Listener)(nil)

// Addr returns the bound address.
func (l *Listener) Addr() string { return l.nl.Addr().String() }

func (l *Listener) accept() {
	defer l.wg.Done()
	const minBackoff, maxBackoff = 5 * time.Millisecond, time.Second
	backoff := minBackoff
	var timer *time.Timer
	for {
		nc, err := l.nl.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return // closed by Shutdown or Close
			}
			// Out of file descriptors, say: keep accepting once some are
			// released, as net/http does.
			if l.t.mux.Logger != nil {
				l.t.mux.Logger.Warn("tcp: accept failed", "addr", l.Addr(), "err", err, "retry", backoff)
			}
			if timer == nil {
				timer = time.NewTimer(backoff)
				defer timer.Stop()
			} else {
				timer.Reset(backoff)
			}
			select {
			case <-timer.C:
			case <-l.ctx.Done():
				return
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		if l.t.serverTLS != nil {
			nc = tls.Server(nc, l.t.serverTLS)
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			nc.Close()
			return
		}
		l.conns[nc] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go func() {
			defer l.wg.Done()
			err := mux.Serve(l.ctx, nc, l.h, l.t.mux)
			if err != nil && l.t.mux.Logger != nil {
				l.t.mux.Logger.Debug("tcp: connection closed", "remote", nc.RemoteAddr().String(), "err", err)
			}
			l.mu.Lock()
			delete(l.conns, nc)
			l.mu.Unlock()
		}()
	}
}

// Shutdown stops accepting, sends goaway on every connection and waits for
// their calls to finish, or for ctx to be done (then it closes them).
func (l *Listener) Shutdown(ctx context.Context) error {
	l.stop()
	l.cancel()
	go func() {
		l.wg.Wait()
		l.once.Do(func() { close(l.done) })
	}()
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		l.closeConns()
		<-l.done
		return ctx.Err()
	}
}

// Close stops at once: connections close and their calls fail.
func (l *Listener) Close() error {
	l.stop()
	l.cancel()
	l.closeConns()
	l.wg.Wait()
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *Listener) stop() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.nl.Close()
}

func (l *Listener) closeConns() {
	l.mu.Lock()
	for c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
}
