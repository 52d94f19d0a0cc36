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
// # Security
//
// Plain TCP authenticates nobody and encrypts nothing: whoever reaches the
// port can call every pattern the node serves. So a listener serves plain
// TCP only on a loopback address (127.0.0.1, ::1, localhost) unless
// [WithInsecure] says otherwise; on any other address it needs
// [WithServerTLS] (Listen fails without one of them, as gRPC wants
// insecure credentials spelled out). TLS alone encrypts and proves the
// server to its callers, but still serves anyone who reaches the port;
// with ClientAuth set to tls.RequireAndVerifyClientCert and ClientCAs,
// mutual TLS serves only callers holding a certificate from those CAs.
// A certificate may name its node's id (runtime.NodeURI): a node then
// routes a peer only as the id its server certificate names, and a
// handler sees a caller as the id its client certificate names
// ([Conn.PeerCertificate] gives the verified server certificate).
//
// # Limits
//
// A listener holds at most [WithMaxConns] connections (by default half the
// process's file-descriptor limit, at most 4096), and at most
// [WithMaxConnsPerIP] from one IP address (an IPv6 /64; by default a
// quarter of the maximum); an eighth of the maximum is kept for IPs with
// fewer than 4 connections. When the listener is full, the IP with the
// most connections gives one up to an IP with at least two fewer: its
// connection idle longest (no request in flight since the listener last
// looked; a connection still in its handshake counts as idle since it was
// accepted), else one without a request in flight, else one with requests
// in flight, which its caller sends again (the node's de-duplication keeps
// a call from running twice); to an IP with one fewer, only an idle one.
// Otherwise, and at the per-IP limit, the newcomer's IP makes room among
// its own connections, one without a request in flight; when all of them
// have requests in flight, the newcomer is closed instead. So neither
// connections held open by an attacker nor a few IPs keeping many
// connections busy can lock new callers out. A connection without a
// request in flight for [WithIdleTimeout] (10 minutes by default) is sent
// a goaway, so that its caller reconnects when it needs to; the handshakes
// (TLS and wizard's) must end within 10 seconds. Connections refused or
// closed for a limit, and connections that fail their handshake, are
// logged at Warn with the remote address, at most 10 records of a kind
// every 10 seconds and then one that counts the others ("... N more
// suppressed").
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
// less an eighth of the limit kept for connections not busy yet, and once
// the node is full its calls beyond are refused at once, as the node
// refuses calls over its limit, so that a flood on one connection does
// not take the others' room (while the node has room, nobody is refused).
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
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/bridge"
	"github.com/wizardmesh/wizard/runtime/internal/listen"
	"github.com/wizardmesh/wizard/runtime/internal/mux"
	"github.com/wizardmesh/wizard/runtime/internal/streamconn"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
	"google.golang.org/protobuf/proto"
)

// Transport is the TCP transport. Create it with [New].
type Transport struct {
	conf   listen.Config // what the options shared with quic set
	dialer net.Dialer
}

var _ runtime.Transport = (*Transport)(nil)

// Option configures a [Transport] in [New].
type Option interface{ apply(*Transport) error }

type optionFunc func(*Transport) error

func (f optionFunc) apply(t *Transport) error { return f(t) }

// shared is an option that tcp and quic take alike.
func shared(o listen.Option) Option {
	return optionFunc(func(t *Transport) error { return o(&t.conf) })
}

// WithServerTLS serves over TLS with cfg: its Certificates (or
// GetCertificate), and ClientAuth with ClientCAs for mutual TLS. Without
// ClientAuth (tls.RequireAndVerifyClientCert) the server does not verify
// its callers: anyone who can reach the port can call every pattern the
// node serves, over an encrypted connection. [New] fails when cfg is nil
// or has no certificate, and with [WithInsecure].
func WithServerTLS(cfg *tls.Config) Option {
	return shared(listen.ServerTLS(cfg, "leave the option out to serve plain TCP"))
}

// WithClientTLS dials over TLS with cfg: RootCAs and ServerName to verify
// the server (ServerName defaults to the dialed host, as [tls.Dial] does),
// Certificates for mutual TLS. [New] fails when cfg is nil.
func WithClientTLS(cfg *tls.Config) Option {
	return shared(listen.ClientTLS(cfg, "leave the option out to dial plain TCP"))
}

// WithInsecure lets a listener serve plain TCP, without TLS, on an address
// other than loopback, where anyone who can reach the port can call every
// pattern the node serves and read the traffic: for a network that is
// trusted as a whole. Loopback addresses need no option. [New] fails when
// [WithServerTLS] is given too.
func WithInsecure() Option { return shared(listen.Insecure()) }

// WithMaxConns sets how many connections a listener holds at once: 0 for
// the default, half the process's file-descriptor limit (the soft
// RLIMIT_NOFILE when the listener starts; Go raises it to the hard limit
// at start) and at most 4096, else at least 1. An eighth of it is kept for
// IPs with fewer than 4 connections. A connection beyond it takes the
// place of one of the IP with the most connections, when that IP has at
// least two more than the newcomer's (busy or not, the idlest first), or
// else of one of its own IP's without a request in flight, which is
// closed; when there is none, the new one is closed (see the package
// documentation's Limits).
func WithMaxConns(n int) Option { return shared(listen.MaxConns(n)) }

// WithMaxConnsPerIP sets how many connections a listener holds at once
// from one IP address (IPv4) or one /64 (IPv6): 0 for the default, a
// quarter of the maximum ([WithMaxConns]), else from 1 to the maximum. A
// connection beyond it takes the place of one of that address's
// connections without a request in flight (the idlest), which is closed;
// when every one of them has a request in flight, the new one is closed.
func WithMaxConnsPerIP(n int) Option { return shared(listen.MaxConnsPerIP(n)) }

// WithIdleTimeout sets how long a served connection may stay without a
// request in flight (keep-alive pings do not count) before the listener
// sends it a goaway: 0 for the default (10 minutes), a negative value for
// no limit, else at least 10ms. The connection goes within twice the
// timeout; its caller reconnects when it calls again.
func WithIdleTimeout(d time.Duration) Option { return shared(listen.IdleTimeout(d)) }

// WithMaxFrameSize sets the largest frame read or written: 0 for the
// default (4 MiB), else from 14 bytes to 4 GiB. Peers should share it.
func WithMaxFrameSize(n int) Option { return shared(listen.MaxFrameSize(n)) }

// WithKeepAlive sets the ping interval and how long a peer has to answer
// before its connection is closed as dead: 0 for the defaults (15s and
// 10s), else at least 10ms each; a negative interval turns pings off.
// While calls wait for answers on a connection, the caller's side looks
// closer: it pings after 250ms without a frame from the peer and gives it
// 1s to answer (at most interval and timeout), so that a peer gone silent
// (a partition, a host that froze) is found 1.25 to 1.5s after its last
// frame (it looks every 250ms, and a frame read since its last look puts
// the ping off one look) and the calls that may be sent again go to
// another peer. A peer
// whose host acknowledged the ping at the TCP level (on Linux, read from
// the socket's TCP_INFO) is up and reachable, its process slow (a starved
// CPU, a CPU quota, a long GC): it has the timeout to answer instead, so
// that a loaded peer's connections are not closed under it.
func WithKeepAlive(interval, timeout time.Duration) Option {
	return shared(listen.KeepAlive(interval, timeout))
}

// WithLogger receives a record for each connection that closes
// abnormally, is refused or closed for a connection limit; nil, the
// default, discards them. A listener's records at Warn and above are
// rate-limited (see the package documentation).
func WithLogger(l *slog.Logger) Option { return shared(listen.Logger(l)) }

// WithMaxConnInFlight bounds the calls whose handlers run at once for one
// connection: 0 for the default (256), else at least 1. Further calls
// wait, in order, and once they fill their bound in bytes
// ([WithMaxConnQueued]) the listener stops reading the connection, so
// that the caller's kernel holds it back rather than this node buffering.
func WithMaxConnInFlight(n int) Option { return shared(listen.MaxConnInFlight(n)) }

// WithMaxConnQueued bounds, in bytes and for one connection, the answers
// waiting to be written and, as much again, the calls waiting for a
// handler: 0 for the default (1 MiB), else at least 1. At the bound the
// listener stops reading the connection: a caller that does not read its
// answers costs at most twice n plus an answer per handler running (see
// [WithMaxConnInFlight]).
func WithMaxConnQueued(n int) Option { return shared(listen.MaxConnQueued(n)) }

// WithServeTimeout sets the deadline of a call that arrives without one:
// 0 for the default (30s), else at least 1ms. Nodes always send their
// remaining budget (see [runtime.WithDefaultTimeout]); a raw client may
// not, and its handler's ctx then ends after d, also when the handler
// runs on after its connection is lost ([runtime.FlagKeep]).
func WithServeTimeout(d time.Duration) Option { return shared(listen.ServeTimeout(d)) }

// New returns a TCP transport. It fails on a nil option and on an
// option's invalid argument, with an error that names the option.
func New(opts ...Option) (*Transport, error) {
	t := &Transport{}
	if err := listen.Apply("tcp", &t.conf, opts, func(o Option) error { return o.apply(t) }); err != nil {
		return nil, err
	}
	if t.conf.Insecure && t.conf.ServerTLS != nil {
		return nil, errors.New("wizard: tcp: WithInsecure and WithServerTLS: choose one (WithInsecure serves plain TCP)")
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
	hctx, cancel := context.WithTimeout(ctx, cmp.Or(t.conf.Mux.HandshakeTimeout, mux.DefaultHandshakeTimeout))
	defer cancel()
	stop := context.AfterFunc(hctx, func() { tc.Close() })
	nc, cert := net.Conn(tc), (*x509.Certificate)(nil)
	if t.conf.ClientTLS != nil {
		cfg := t.conf.ClientTLS
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
		nc, cert = tlsConn, bridge.VerifiedLeaf(tlsConn.ConnectionState())
	}
	cl, err := mux.NewClient(nc, t.conf.Mux)
	if !stop() { // hctx ended and closed the connection
		if err == nil {
			cl.Close()
		}
		return nil, bridge.NotSent(where, fmt.Errorf("handshake: %w", hctx.Err()))
	}
	if err != nil {
		return nil, bridge.NotSent(where, err)
	}
	return &Conn{cl: cl, cert: cert, where: "wizard: tcp: " + addr}, nil
}

// Conn is a client connection to one node.
type Conn struct {
	cl    *mux.Client
	cert  *x509.Certificate // the server's, as verified (nil for plain TCP)
	where string            // "wizard: tcp: <addr>", to start its errors
}

var (
	_ runtime.GoAwayConn          = (*Conn)(nil)
	_ runtime.PeerCertificateConn = (*Conn)(nil)
	_ runtime.BodyCaller          = (*Conn)(nil)
	_ runtime.ReplyReleaser       = (*Conn)(nil)
	_ streamconn.Opener           = (*Conn)(nil)
)

// Call sends m and waits for the reply. An error of the connection reads
// "wizard: tcp: <addr>: call not sent: <why>" (and matches
// [runtime.ErrNotSent]) or "wizard: tcp: <addr>: connection lost after
// the call was sent: <why>".
func (c *Conn) Call(ctx context.Context, m *runtime.Message) (*runtime.Message, error) {
	return bridge.Call(ctx, c.cl, m, c.where)
}

// CallBody is [runtime.BodyCaller.CallBody]: body, of size bytes
// (proto.Size), is marshalled straight into the request's frame. A node
// calls it for the requests it leaves unencoded. Like Call, it keeps
// nothing of m once it returns.
func (c *Conn) CallBody(ctx context.Context, m *runtime.Message, body proto.Message, size int) (*runtime.Message, error) {
	return bridge.CallBody(ctx, c.cl, m, body, size, c.where)
}

// ReleaseReply is [runtime.ReplyReleaser.ReleaseReply]: it gives back
// the memory of m, a reply that c's Call or CallBody returned, for a later
// call to reuse; m and everything it points to (its Payload, Error and
// Meta) must not be used afterwards.
func (c *Conn) ReleaseReply(m *runtime.Message) { bridge.ReleaseReply(m) }

// OpenStream opens a stream on the connection; the node calls it to open
// a stream (runtime.Node.OpenStream) to the peer. Its errors read as
// Call's.
func (c *Conn) OpenStream(ctx context.Context, open *wire.Frame) (streamconn.Client, error) {
	return bridge.OpenStream(ctx, c.cl, open, c.where)
}

// Done is closed when the connection is gone.
func (c *Conn) Done() <-chan struct{} { return c.cl.Done() }

// Reason returns why c ended (the peer did not answer a ping in time, it
// closed the connection, c was closed), or nil while c is open. A node
// names it when it warns that its connection to a peer was lost.
func (c *Conn) Reason() error { return c.cl.Err() }

// GoAway reports whether the server said goaway on c.
func (c *Conn) GoAway() bool { return c.cl.GoAway() }

// Close closes the connection; calls in flight fail.
func (c *Conn) Close() error { return c.cl.Close() }

// PeerCertificate returns the certificate the server presented and
// [WithClientTLS]'s configuration verified, or nil over plain TCP.
func (c *Conn) PeerCertificate() *x509.Certificate { return c.cert }

// Listen accepts connections on addr and serves their calls with s. Plain
// TCP (no [WithServerTLS]) on an address other than loopback needs
// [WithInsecure].
func (t *Transport) Listen(addr string, s runtime.Server) (runtime.Listener, error) {
	nl, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("wizard: tcp: listen %s: %w", addr, err)
	}
	if ta, ok := nl.Addr().(*net.TCPAddr); ok && t.conf.ServerTLS == nil && !t.conf.Insecure && !ta.IP.IsLoopback() {
		nl.Close()
		return nil, fmt.Errorf("wizard: tcp: listen %s: plain TCP on an address other than loopback lets anyone who reaches the port call the node: set WithServerTLS (with ClientAuth for mutual TLS), or WithInsecure to serve plain TCP anyway", addr)
	}
	l := &Listener{t: t, nl: nl, conns: listen.NewConns("tcp", &t.conf, s)}
	l.watch = mux.NewWatcher() // one watch over the inline serving of every connection
	l.conns.Go(l.accept)
	return l, nil
}

// Listener accepts connections for a node.
type Listener struct {
	t     *Transport
	nl    net.Listener
	conns *listen.Conns // the connections, within the limits
	watch *mux.Watcher
}

var _ runtime.Listener = (*Listener)(nil)

// Addr returns the bound address.
func (l *Listener) Addr() string { return l.nl.Addr().String() }

func (l *Listener) accept() {
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
			l.conns.Guard.Log.Warn("wizard: tcp: accept failed", "addr", l.Addr(), "err", err, "retry", backoff)
			if timer == nil {
				timer = time.NewTimer(backoff)
				defer timer.Stop()
			} else {
				timer.Reset(backoff)
			}
			select {
			case <-timer.C:
			case <-l.conns.Stopped():
				return
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		l.serve(nc)
	}
}

// serve admits the accepted connection tc within the limits and serves
// it in a goroutine of its own.
func (l *Listener) serve(tc net.Conn) {
	nc := tc
	var state func() tls.ConnectionState
	if l.t.conf.ServerTLS != nil {
		tlsc := tls.Server(tc, l.t.conf.ServerTLS)
		nc, state = tlsc, tlsc.ConnectionState
	}
	ctx, c, err := l.conns.Admit(tc.RemoteAddr(), func() { tc.Close() }, func() { nc.Close() })
	if err != nil {
		tc.Close()
		return
	}
	if state != nil {
		ctx = bridge.WithTLSIdentity(ctx, state) // what de-duplicated answers are bound to
	}
	ctx = bridge.WithRemote(ctx, runtime.NewRemote("tcp", tc.RemoteAddr().String(), state)) // what handlers see of their callers
	opts := c.Options()
	opts.Watch = l.watch
	// Detached: past the handshake no goroutine of this one waits on the
	// connection while it is idle.
	go mux.ServeDetached(ctx, nc, c.Handler(), opts, func(err error) {
		if err != nil {
			l.conns.Guard.Log.Debug("wizard: tcp: connection closed", "remote", tc.RemoteAddr().String(), "err", err)
		}
		c.End()
	})
}

// Shutdown stops accepting, sends goaway on every connection and waits for
// their calls to finish, or for ctx to be done (then it closes them).
func (l *Listener) Shutdown(ctx context.Context) error {
	l.nl.Close()
	return l.conns.Shutdown(ctx)
}

// Close stops at once: connections close and their calls fail.
func (l *Listener) Close() error {
	l.nl.Close()
	l.conns.Close()
	return nil
}
