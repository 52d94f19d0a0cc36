// Package tcp is wizard's default transport: many concurrent calls
// multiplexed over one TCP connection per peer, plain, TLS or mutual TLS.
//
//	tr, err := tcp.New() // options: TLS, frame size, keep-alive, logger
//	if err != nil {
//		return err
//	}
//	node, err := runtime.New(
//		runtime.WithTransport(tr),
//		runtime.WithListen("127.0.0.1:0"),
//		runtime.WithDiscovery(runtime.StaticPeers("10.0.0.7:7070")),
//	)
//
// Frames follow the wizard wire format (magic and version handshake, one
// frame per request, response, cancel, ping or goaway); a malformed or
// oversized frame closes that connection with a logged reason and never
// the process.
//
// What a caller costs a listener is bounded, whatever it sends: at most
// [WithMaxConnInFlight] handlers run at once per connection (256), calls
// beyond wait in order, and once they, or the answers waiting to be
// written, hold [WithMaxConnQueued] bytes (1 MiB) the listener stops
// reading the connection, so that the caller's kernel holds it back (a
// caller that does not read costs at most twice that, plus an answer per
// handler running). Every ping is answered. A call that arrives without a
// deadline gets [WithServeTimeout] (30s), also when it runs on after its
// connection is lost. A node's [runtime.WithMaxInFlight] limit is shared
// among its connections: each busy connection may hold an equal part,
// less an eighth of the limit kept for connections not busy yet, and its
// calls beyond are refused at once, as the node refuses calls over its
// limit, so that a flood on one connection does not take the others'
// room.
//
// [New] checks every option and fails on the first invalid one, with an
// error that names it ("wizard: tcp: WithMaxFrameSize(3): want 0 for the
// default (4 MiB) or 14 to 4294967295 bytes"). An error of a dial or of a
// connection matches [runtime.ErrNotSent] when the call surely did not
// reach the peer, and reads "wizard: tcp: dial <addr>: call not sent:
// <why>" or "wizard: tcp: <addr>: call not sent: <why>".
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

// Option configures a [Transport] in [New].
type Option interface{ apply(*Transport) error }

type optionFunc func(*Transport) error

func (f optionFunc) apply(t *Transport) error { return f(t) }

// WithServerTLS serves over TLS with cfg: its Certificates (or
// GetCertificate), and ClientAuth with ClientCAs for mutual TLS. [New]
// fails when cfg is nil or has no certificate.
func WithServerTLS(cfg *tls.Config) Option {
	return optionFunc(func(t *Transport) error {
		if cfg == nil {
			return errors.New("WithServerTLS(nil): no configuration; leave the option out to serve plain TCP")
		}
		if err := bridge.CheckServerTLS(cfg); err != nil {
			return err
		}
		t.serverTLS = cfg
		return nil
	})
}

// WithClientTLS dials over TLS with cfg: RootCAs and ServerName to verify
// the server (ServerName defaults to the dialed host, as [tls.Dial] does),
// Certificates for mutual TLS. [New] fails when cfg is nil.
func WithClientTLS(cfg *tls.Config) Option {
	return optionFunc(func(t *Transport) error {
		if cfg == nil {
			return errors.New("WithClientTLS(nil): no configuration; leave the option out to dial plain TCP")
		}
		t.clientTLS = cfg
		return nil
	})
}

// WithMaxFrameSize sets the largest frame read or written: 0 for the
// default (4 MiB), else from 14 bytes to 4 GiB. Peers should share it.
func WithMaxFrameSize(n int) Option {
	return optionFunc(func(t *Transport) error {
		if err := bridge.CheckMaxFrameSize(n); err != nil {
			return err
		}
		t.mux.MaxFrameSize = n
		return nil
	})
}

// WithKeepAlive sets the ping interval and how long a peer has to answer
// before its connection is closed as dead: 0 for the defaults (15s and
// 10s), else at least 10ms each; a negative interval turns pings off.
func WithKeepAlive(interval, timeout time.Duration) Option {
	return optionFunc(func(t *Transport) error {
		if err := bridge.CheckKeepAlive(interval, timeout); err != nil {
			return err
		}
		t.mux.KeepAlive, t.mux.KeepAliveTimeout = interval, timeout
		return nil
	})
}

// WithLogger receives a record for each connection that closes
// abnormally; nil, the default, discards them.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(t *Transport) error {
		t.mux.Logger = l
		return nil
	})
}

// WithMaxConnInFlight bounds the calls whose handlers run at once for one
// connection: 0 for the default (256), else at least 1. Further calls
// wait, in order, and once they fill their bound in bytes
// ([WithMaxConnQueued]) the listener stops reading the connection, so
// that the caller's kernel holds it back rather than this node buffering.
func WithMaxConnInFlight(n int) Option {
	return optionFunc(func(t *Transport) error {
		if err := bridge.CheckMaxConnInFlight(n); err != nil {
			return err
		}
		t.mux.MaxInFlight = n
		return nil
	})
}

// WithMaxConnQueued bounds, in bytes and for one connection, the answers
// waiting to be written and, as much again, the calls waiting for a
// handler: 0 for the default (1 MiB), else at least 1. At the bound the
// listener stops reading the connection: a caller that does not read its
// answers costs at most twice n plus an answer per handler running (see
// [WithMaxConnInFlight]).
func WithMaxConnQueued(n int) Option {
	return optionFunc(func(t *Transport) error {
		if err := bridge.CheckMaxConnQueued(n); err != nil {
			return err
		}
		t.mux.MaxQueued = n
		return nil
	})
}

// WithServeTimeout sets the deadline of a call that arrives without one:
// 0 for the default (30s), else at least 1ms. Nodes always send their
// remaining budget (see [runtime.WithDefaultTimeout]); a raw client may
// not, and its handler's ctx then ends after d, also when the handler
// runs on after its connection is lost ([runtime.FlagKeep]).
func WithServeTimeout(d time.Duration) Option {
	return optionFunc(func(t *Transport) error {
		if err := bridge.CheckServeTimeout(d); err != nil {
			return err
		}
		t.mux.ServeTimeout = d
		return nil
	})
}

// New returns a TCP transport. It fails on a nil option and on an
// option's invalid argument, with an error that names the option.
func New(opts ...Option) (*Transport, error) {
	t := &Transport{}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("wizard: tcp: option %d of %d is nil", i+1, len(opts))
		}
		if err := o.apply(t); err != nil {
			return nil, fmt.Errorf("wizard: tcp: %w", err)
		}
	}
	return t, nil
}

// Name returns "tcp".
func (t *Transport) Name() string { return "tcp" }

// Dial connects to the node listening at addr. The handshakes (TLS, then
// wizard's) end with ctx, and within the handshake timeout. Every error
// matches [runtime.ErrNotSent] and reads "wizard: tcp: dial <addr>: call
// not sent: <why>".
func (t *Transport) Dial(ctx context.Context, addr string) (runtime.Conn, error) {
	where := "wizard: tcp: dial " + addr
	tc, err := t.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Op == "dial" {
			err = oe.Err // "dial tcp <addr>" again, else
		}
		return nil, bridge.NotSent(where, err)
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
			return nil, bridge.NotSent(where, fmt.Errorf("tls handshake: %w", err))
		}
		nc = tlsConn
	}
	cl, err := mux.NewClient(nc, t.mux)
	if !stop() { // hctx ended and closed the connection
		if err == nil {
			cl.Close()
		}
		return nil, bridge.NotSent(where, fmt.Errorf("handshake: %w", hctx.Err()))
	}
	if err != nil {
		return nil, bridge.NotSent(where, err)
	}
	return &Conn{cl: cl, where: "wizard: tcp: " + addr}, nil
}

// Conn is a client connection to one node.
type Conn struct {
	cl    *mux.Client
	where string // "wizard: tcp: <addr>", to start its errors
}

var _ runtime.Conn = (*Conn)(nil)

// Call sends m and waits for the reply. An error of the connection reads
// "wizard: tcp: <addr>: call not sent: <why>" (and matches
// [runtime.ErrNotSent]) or "wizard: tcp: <addr>: connection lost after
// the call was sent: <why>".
func (c *Conn) Call(ctx context.Context, m *runtime.Message) (*runtime.Message, error) {
	return bridge.Call(ctx, c.cl, m, c.where)
}

// Done is closed when the connection is gone.
func (c *Conn) Done() <-chan struct{} { return c.cl.Done() }

// Close closes the connection; calls in flight fail.
func (c *Conn) Close() error { return c.cl.Close() }

// Listen accepts connections on addr and serves their calls with s.
func (t *Transport) Listen(addr string, s runtime.Server) (runtime.Listener, error) {
	nl, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("wizard: tcp: listen %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Listener{
		t:      t,
		nl:     nl,
		h:      bridge.Handler(s),
		budget: bridge.Budget(s),
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
	budget *mux.Budget     // the node's in-flight limit, shared among connections; nil: none
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
				l.t.mux.Logger.Warn("wizard: tcp: accept failed", "addr", l.Addr(), "err", err, "retry", backoff)
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
		opts := l.t.mux
		if l.budget != nil {
			opts.Share = l.budget.Share() // each connection is a caller of its own
		}
		go func() {
			defer l.wg.Done()
			err := mux.Serve(l.ctx, nc, l.h, opts)
			if opts.Share != nil {
				opts.Share.Close()
			}
			if err != nil && l.t.mux.Logger != nil {
				l.t.mux.Logger.Debug("wizard: tcp: connection closed", "remote", nc.RemoteAddr().String(), "err", err)
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
