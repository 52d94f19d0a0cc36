package quic

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	quicgo "github.com/quic-go/quic-go"
	"github.com/wizardmesh/wizard/runtime/internal/listen"
)

// Option configures a [Transport] in [New].
type Option interface{ apply(*Transport) error }

type optionFunc func(*Transport) error

func (f optionFunc) apply(t *Transport) error { return f(t) }

// shared is an option that quic and tcp take alike.
func shared(o listen.Option) Option {
	return optionFunc(func(t *Transport) error { return o(&t.conf) })
}

// WithServerTLS serves with cfg: its Certificates (or GetCertificate), and
// ClientAuth with ClientCAs for mutual TLS. Without ClientAuth
// (tls.RequireAndVerifyClientCert) the server does not verify its callers:
// anyone who can reach the port can call every pattern the node serves,
// over an encrypted connection. The transport works on a clone and sets
// MinVersion to TLS 1.3 and NextProtos to [ALPN]. Without it,
// [Transport.Listen] fails unless [WithInsecureSelfSigned] is set. [New]
// fails when cfg is nil or has no certificate.
func WithServerTLS(cfg *tls.Config) Option {
	return shared(listen.ServerTLS(cfg, "a listener needs one with a certificate (or WithInsecureSelfSigned, for development)"))
}

// WithClientTLS dials with cfg: RootCAs and ServerName to verify the server
// (ServerName defaults to the dialed host), Certificates for mutual TLS.
// The transport works on a clone and sets MinVersion to TLS 1.3 and
// NextProtos to [ALPN]. Without it, [Transport.Dial] verifies servers
// against the system roots (or not at all with [WithInsecureSelfSigned]).
// [New] fails when cfg is nil.
func WithClientTLS(cfg *tls.Config) Option {
	return shared(listen.ClientTLS(cfg, "leave the option out to verify servers against the system roots"))
}

// WithInsecureSelfSigned is for development and tests: when no
// [WithServerTLS] is given, Listen serves a self-signed certificate (one
// per transport, made by [New]), and when no [WithClientTLS] is given,
// Dial accepts any server certificate. Traffic is still encrypted, but
// nodes do not authenticate each other, so anyone on the path can
// impersonate a server.
func WithInsecureSelfSigned() Option { return shared(listen.Insecure()) }

// WithQUICConfig is the escape hatch to quic-go's settings (flow-control
// windows, idle and handshake timeouts, stream limits, tracing). The
// transport uses a clone of cfg as it is, in place of its own defaults
// (which allow 16 incoming bidirectional streams, no unidirectional ones,
// bound the receive windows of a stream and of a connection to 1 and 2
// MiB, and send QUIC keep-alives at the [WithKeepAlive] interval). quic-go
// checks cfg when the transport listens or dials. [New] fails when cfg
// is nil.
func WithQUICConfig(cfg *quicgo.Config) Option {
	return optionFunc(func(t *Transport) error {
		if cfg == nil {
			return errors.New("WithQUICConfig(nil): no configuration; leave the option out for the transport's defaults")
		}
		t.quicConf = cfg
		return nil
	})
}

// WithStreams sets how many long-lived streams a dialed connection opens:
// 0 for the default (4), else from 1 to 16; the server must allow as many
// incoming streams (its default allows 16). Each runs its own
// multiplexer; how calls are spread over them is [WithStreamFill]'s.
// A listener bounds a connection as a whole, however many streams it
// has (see [WithMaxConnInFlight]): more streams spread a lost packet's
// stall over fewer calls, but take no more of the listener.
func WithStreams(n int) Option {
	return optionFunc(func(t *Transport) error {
		if n < 0 || n > maxStreams {
			return fmt.Errorf("WithStreams(%d): want 0 for the default (%d) or 1 to %d", n, defaultStreams, maxStreams)
		}
		t.streams = n
		return nil
	})
}

// WithStreamFill sets how calls are spread over a dialed connection's
// streams ([WithStreams]): a call takes the first stream with fewer than
// n calls in flight, else the stream with the fewest. 0 is the default
// (64); a negative value sends calls to the streams in turn, whatever
// their load. Filling the streams in order puts the frames of many calls
// into each write and each QUIC packet: over loopback, 16 callers taking
// 4 streams in turn cost about twice the CPU per call that they cost on
// one. Past n calls in flight the next stream takes the excess, so that a
// lost packet stalls only part of the calls; taking the streams in turn
// spreads even a few calls so. The listener's bounds
// ([WithMaxConnInFlight], [WithMaxConnQueued]) hold for the connection,
// whatever the number of its streams.
func WithStreamFill(n int) Option {
	return optionFunc(func(t *Transport) error {
		t.fill = n
		return nil
	})
}

// WithMaxFrameSize sets the largest frame read or written: 0 for the
// default (4 MiB), else from 14 bytes to 4 GiB. Peers should share it.
func WithMaxFrameSize(n int) Option { return shared(listen.MaxFrameSize(n)) }

// WithKeepAlive sets the ping interval and how long a peer has to answer
// before its connection is closed as dead: 0 for the defaults (15s and
// 10s), else at least 10ms each; a negative interval turns pings off.
// While calls wait for answers on a connection, the caller's side looks
// closer: it pings after 250ms without a frame from the peer and gives it
// 1s to answer (at most interval and timeout), so that a peer gone silent
// (a partition, a host that froze) is found 1.25s at most after its last
// frame and the calls that may be sent again go to another peer.
// Every stream pings; unless [WithQUICConfig] is given, QUIC keep-alives
// are sent at the same interval so that idle connections outlive QUIC's
// idle timeout (30s). With pings off, an idle connection ends after that
// timeout and the node dials again.
func WithKeepAlive(interval, timeout time.Duration) Option {
	return shared(listen.KeepAlive(interval, timeout))
}

// WithMaxConns sets how many connections a listener holds at once: 0 for
// the default, half the process's file-descriptor limit (the soft
// RLIMIT_NOFILE when the listener starts; Go raises it to the hard limit
// at start) and at most 4096, else at least 1. An eighth of it is kept for
// IPs with fewer than 4 connections. A connection beyond it takes the
// place of one of the IP with the most connections, when that IP has at
// least two more than the newcomer's (busy or not, the idlest first), or
// else of one of its own IP's without a request in flight, which is
// closed; when there is none, the new one is closed (see the package
// documentation's Limits). QUIC
// connections share the listener's UDP socket, so here the limit bounds
// memory rather than descriptors; it also bounds the QUIC handshakes in
// progress.
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

// WithLogger receives a record for each connection that closes abnormally,
// is refused or closed for a connection limit, and a warning when the UDP
// socket buffers are too small (see the package documentation); nil, the
// default, discards them. A listener's records at Warn and above are
// rate-limited (see the package documentation).
func WithLogger(l *slog.Logger) Option { return shared(listen.Logger(l)) }

// WithMaxConnInFlight bounds the calls whose handlers run at once for one
// connection, all its streams together: 0 for the default (256), else at
// least 1. Further calls wait, in order on each stream, and once they
// fill their bound in bytes ([WithMaxConnQueued]) the listener stops
// reading the connection's streams, so that QUIC's flow control holds
// the caller back rather than this node buffering.
func WithMaxConnInFlight(n int) Option { return shared(listen.MaxConnInFlight(n)) }

// WithMaxConnQueued bounds, in bytes and for one connection, all its
// streams together, the answers waiting to be written and, as much
// again, the calls waiting for a handler: 0 for the default (1 MiB),
// else at least 1. At the bound the listener stops reading the
// connection's streams: a caller that does not read its answers costs
// at most twice n plus an answer per handler running (see
// [WithMaxConnInFlight]), and what QUIC's receive windows hold (see
// [WithQUICConfig]).
func WithMaxConnQueued(n int) Option { return shared(listen.MaxConnQueued(n)) }

// WithServeTimeout sets the deadline of a call that arrives without one:
// 0 for the default (30s), else at least 1ms. Nodes always send their
// remaining budget (see [runtime.WithDefaultTimeout]); a raw client may
// not, and its handler's ctx then ends after d, also when the handler
// runs on after its connection is lost ([runtime.FlagKeep]).
func WithServeTimeout(d time.Duration) Option { return shared(listen.ServeTimeout(d)) }
