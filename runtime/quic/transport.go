package quic

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	quicgo "github.com/quic-go/quic-go"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/bridge"
	"github.com/wizardmesh/wizard/runtime/internal/listen"
	"github.com/wizardmesh/wizard/runtime/internal/mux"
)

// ALPN is the application protocol wizard negotiates in the TLS handshake;
// a peer that does not offer it is refused.
const ALPN = "wizard/1"

// The stream defaults and bounds of [WithStreams] and [WithStreamFill].
const (
	defaultStreams = 4
	maxStreams     = 16
	defaultFill    = 64
)

// The receive windows of a stream and of a connection at most: what a
// peer may send that this side has not read yet, and so what it buffers
// when it stops reading (a listener at a connection's bounds). quic-go
// starts them at 512 KiB and 768 KiB and grows them while reading keeps
// up; its own maximums (6 and 15 MiB) are for long paths across the
// internet, where these would cap a connection at about 200 Mbit/s per
// 100 ms of round trip.
const (
	maxStreamWindow = 1 << 20
	maxConnWindow   = 2 << 20
)

// The application error codes a connection is closed with.
const (
	codeNoError quicgo.ApplicationErrorCode = 0 // an orderly close
	codeError   quicgo.ApplicationErrorCode = 1 // a stream failed
	codeRefused quicgo.ApplicationErrorCode = 2 // over a connection limit
	codeClosed  quicgo.ApplicationErrorCode = 3 // the listener closed at once: that run of the node is gone
)

// Transport is the QUIC transport. Create it with [New]; it is safe for
// concurrent use, and one value serves any number of listeners and
// connections.
type Transport struct {
	conf     listen.Config    // what the options shared with tcp set
	cert     *tls.Certificate // WithInsecureSelfSigned's, without WithServerTLS
	quicConf *quicgo.Config
	streams  int
	fill     int          // WithStreamFill's: 0 for the default, negative for in turn
	log      *slog.Logger // WithLogger's, else one that discards

	warnOnce sync.Once // the first small-buffer report is a warning
}

var _ runtime.Transport = (*Transport)(nil)

// New returns a QUIC transport. It fails on a nil option and on an
// option's invalid argument, with an error that names the option. With
// [WithInsecureSelfSigned] and no [WithServerTLS], it makes the
// self-signed certificate. A transport without a server certificate can
// dial but not listen: [Transport.Listen] says so.
func New(opts ...Option) (*Transport, error) {
	t := &Transport{}
	if err := listen.Apply("quic", &t.conf, opts, func(o Option) error { return o.apply(t) }); err != nil {
		return nil, err
	}
	t.log = t.conf.Mux.Logger
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	if t.streams == 0 {
		t.streams = defaultStreams
	}
	if t.conf.Insecure && t.conf.ServerTLS == nil {
		cert, err := selfSigned()
		if err != nil {
			return nil, fmt.Errorf("wizard: quic: WithInsecureSelfSigned: making the certificate: %w", err)
		}
		t.cert = &cert
	}
	return t, nil
}

// Name returns "quic".
func (t *Transport) Name() string { return "quic" }

// errNoCertificate is Listen's error when no server certificate is
// configured.
var errNoCertificate = errors.New("wizard: quic: listening needs a server certificate: configure one with WithServerTLS (QUIC always runs TLS 1.3), or use WithInsecureSelfSigned for development")

// serverTLSConfig returns the TLS configuration Listen serves with.
func (t *Transport) serverTLSConfig() (*tls.Config, error) {
	switch {
	case t.conf.ServerTLS != nil:
		return withALPN(t.conf.ServerTLS.Clone()), nil
	case t.cert != nil:
		return withALPN(&tls.Config{Certificates: []tls.Certificate{*t.cert}}), nil
	}
	return nil, errNoCertificate
}

// clientTLSConfig returns the TLS configuration Dial uses for host.
func (t *Transport) clientTLSConfig(host string) *tls.Config {
	var cfg *tls.Config
	switch {
	case t.conf.ClientTLS != nil:
		cfg = t.conf.ClientTLS.Clone()
	case t.conf.Insecure:
		cfg = &tls.Config{InsecureSkipVerify: true} // documented on WithInsecureSelfSigned
	default:
		cfg = &tls.Config{} // the system roots
	}
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	return withALPN(cfg)
}

// withALPN pins cfg to TLS 1.3 and wizard's ALPN, in the configurations a
// GetConfigForClient callback returns too.
func withALPN(cfg *tls.Config) *tls.Config {
	cfg.MinVersion = tls.VersionTLS13
	cfg.NextProtos = []string{ALPN}
	if get := cfg.GetConfigForClient; get != nil {
		cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := get(hello)
			if c == nil || err != nil {
				return c, err
			}
			c = c.Clone()
			c.GetConfigForClient = nil
			return withALPN(c), nil
		}
	}
	return cfg
}

// quicConfig returns the QUIC configuration for a listener or a dial.
func (t *Transport) quicConfig() *quicgo.Config {
	if t.quicConf != nil {
		return t.quicConf.Clone()
	}
	c := &quicgo.Config{
		MaxIncomingStreams:         maxStreams,
		MaxIncomingUniStreams:      -1,
		MaxStreamReceiveWindow:     maxStreamWindow,
		MaxConnectionReceiveWindow: maxConnWindow,
	}
	switch ka := t.conf.Mux.KeepAlive; {
	case ka == 0:
		c.KeepAlivePeriod = mux.DefaultKeepAlive
	case ka > 0:
		c.KeepAlivePeriod = ka
	}
	return c
}

// Dial connects to the node listening at addr: one QUIC connection, over
// which it opens the streams (see [WithStreams]) and shakes hands on each.
// ctx bounds all of it. Every error matches [runtime.ErrNotSent] and reads
// "wizard: quic: dial <addr>: call not sent: <why>".
func (t *Transport) Dial(ctx context.Context, addr string) (runtime.Conn, error) {
	where := "wizard: quic: dial " + addr
	host, raddr, err := resolve(ctx, addr)
	if err != nil {
		return nil, bridge.NotSent(where, err)
	}
	network := "udp4"
	if raddr.IP.To4() == nil {
		network = "udp6"
	}
	udp, err := net.ListenUDP(network, nil)
	if err != nil {
		return nil, bridge.NotSent(where, err)
	}
	tr := &quicgo.Transport{Conn: udp}
	release := func() {
		tr.Close()
		udp.Close()
	}
	qc, err := tr.Dial(ctx, raddr, t.clientTLSConfig(host), t.quicConfig())
	if err != nil {
		release()
		return nil, bridge.NotSent(where, err)
	}
	t.checkBuffers(udp)
	if p := qc.ConnectionState().TLS.NegotiatedProtocol; p != ALPN {
		qc.CloseWithError(codeError, "wrong application protocol")
		release()
		return nil, bridge.NotSent(where, fmt.Errorf("the server negotiated application protocol %q, not %q", p, ALPN))
	}

	// Open the streams and shake hands on all of them at once. Cancelling
	// ctx closes the connection, which ends the handshakes.
	stop := context.AfterFunc(ctx, func() { qc.CloseWithError(codeError, "dial cancelled") })
	clients := make([]*mux.Client, t.streams)
	errs := make([]error, t.streams)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			s, err := qc.OpenStreamSync(ctx)
			if err != nil {
				errs[i] = err
				return
			}
			clients[i], errs[i] = mux.NewClient(stream{s, qc}, t.conf.Mux)
		})
	}
	wg.Wait()
	stop()
	if err := firstError(errs); err != nil {
		var cause error // why the connection ended, when it did
		if qc.Context().Err() != nil {
			cause = context.Cause(qc.Context())
		}
		for _, cl := range clients {
			if cl != nil {
				cl.Close()
			}
		}
		qc.CloseWithError(codeError, "")
		release()
		switch {
		case ctx.Err() != nil:
			err = ctx.Err()
		case cause != nil && !errors.Is(err, cause):
			err = fmt.Errorf("%w (connection: %w)", err, cause)
		}
		return nil, bridge.NotSent(where, err)
	}
	return newConn(qc, tr, udp, clients, t.streamFill(), "wizard: quic: "+addr), nil
}

// streamFill returns the fill bound of a dialed connection's streams: 0
// when calls take them in turn.
func (t *Transport) streamFill() int64 {
	switch {
	case t.fill < 0:
		return 0
	case t.fill == 0:
		return defaultFill
	}
	return int64(t.fill)
}

// firstError returns the first non-nil error of errs.
func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// resolve splits addr and resolves its host, bounded by ctx. It returns the
// host (for the TLS server name) and the UDP address.
func resolve(ctx context.Context, addr string) (string, *net.UDPAddr, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, err
	}
	p, err := net.DefaultResolver.LookupPort(ctx, "udp", port)
	if err != nil {
		return "", nil, err
	}
	if host == "" { // as net.Dial: the local system
		return "", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p}, nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return "", nil, err
		}
		if len(ips) == 0 {
			return "", nil, fmt.Errorf("no address for %s", host)
		}
		ip = ips[0]
	}
	return host, net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip.Unmap(), uint16(p))), nil
}
