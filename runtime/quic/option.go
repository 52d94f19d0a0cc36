package quic

import (
	"crypto/tls"
	"log/slog"
	"time"

	quicgo "github.com/quic-go/quic-go"
)

// Option configures a [Transport].
type Option interface{ apply(*Transport) }

type optionFunc func(*Transport)

func (f optionFunc) apply(t *Transport) { f(t) }

// WithServerTLS serves with cfg: its Certificates (or GetCertificate), and
// ClientAuth with ClientCAs for mutual TLS. The transport works on a clone
// and sets MinVersion to TLS 1.3 and NextProtos to [ALPN]. Without it,
// [Transport.Listen] fails unless [WithInsecureSelfSigned] is set.
func WithServerTLS(cfg *tls.Config) Option {
	return optionFunc(func(t *Transport) { t.serverTLS = cfg })
}

// WithClientTLS dials with cfg: RootCAs and ServerName to verify the server
// (ServerName defaults to the dialed host), Certificates for mutual TLS.
// The transport works on a clone and sets MinVersion to TLS 1.3 and
// NextProtos to [ALPN]. Without it, [Transport.Dial] verifies servers
// against the system roots (or not at all with [WithInsecureSelfSigned]).
func WithClientTLS(cfg *tls.Config) Option {
	return optionFunc(func(t *Transport) { t.clientTLS = cfg })
}

// WithInsecureSelfSigned is for development and tests: when no
// [WithServerTLS] is given, Listen serves a self-signed certificate (one
// per transport, made when first needed), and when no [WithClientTLS] is given, Dial accepts any
// server certificate. Traffic is still encrypted, but nodes do not
// authenticate each other, so anyone on the path can impersonate a server.
func WithInsecureSelfSigned() Option {
	return optionFunc(func(t *Transport) { t.insecure = true })
}

// WithQUICConfig is the escape hatch to quic-go's settings (flow-control
// windows, idle and handshake timeouts, stream limits, tracing). The
// transport uses a clone of cfg as it is, in place of its own defaults
// (which allow 64 incoming bidirectional streams, no unidirectional ones,
// and send QUIC keep-alives at the [WithKeepAlive] interval).
func WithQUICConfig(cfg *quicgo.Config) Option {
	return optionFunc(func(t *Transport) { t.quicConf = cfg })
}

// WithStreams sets how many long-lived streams a dialed connection opens,
// from 1 to 64 (default 4); the server must allow as many incoming
// streams (its default allows 64). Calls are spread over them in turn;
// each runs its own multiplexer, so more streams mean more writers
// working in parallel and less head-of-line blocking when a packet is
// lost, fewer mean more calls coalesced into each packet.
func WithStreams(n int) Option {
	return optionFunc(func(t *Transport) { t.streams = n })
}

// WithMaxFrameSize sets the largest frame read or written (default 4 MiB).
func WithMaxFrameSize(n int) Option {
	return optionFunc(func(t *Transport) { t.mux.MaxFrameSize = n })
}

// WithKeepAlive sets the ping interval and how long a peer has to answer
// before its connection is closed as dead (defaults 15s and 10s; a negative
// interval turns pings off). Every stream pings; unless [WithQUICConfig] is
// given, QUIC keep-alives are sent at the same interval so that idle
// connections outlive QUIC's idle timeout (30s). With pings off, an idle
// connection ends after that timeout and the node dials again.
func WithKeepAlive(interval, timeout time.Duration) Option {
	return optionFunc(func(t *Transport) { t.mux.KeepAlive, t.mux.KeepAliveTimeout = interval, timeout })
}

// WithLogger receives a record for each connection that closes abnormally,
// and a warning when the UDP socket buffers are too small (see the package
// documentation). The default discards them.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(t *Transport) { t.log = l; t.mux.Logger = l })
}
