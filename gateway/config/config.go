package config

import (
	"net/netip"
	"strings"
	"time"
)

// Config is a gateway configuration file. [Parse] and [Load] return it
// with every default applied, so each field holds the effective value.
type Config struct {
	// Server is the HTTP listener (the file's server).
	Server Server `yaml:"server"`
	// Mesh is the gateway's node in the mesh (mesh).
	Mesh Mesh `yaml:"mesh"`
	// Defaults apply to routes that do not set their own (defaults).
	Defaults Defaults `yaml:"defaults"`
	// Auth says how tokens are verified (auth).
	Auth Auth `yaml:"auth"`
	// CORS is the cross-origin policy (cors).
	CORS CORS `yaml:"cors"`
	// WebSocket is the WebSocket endpoint, nil when off (websocket).
	WebSocket *WebSocket `yaml:"websocket"`
	// RateLimits are the token buckets (rate_limits).
	RateLimits RateLimits `yaml:"rate_limits"`
	// AccessLog is the access log (access_log).
	AccessLog AccessLog `yaml:"access_log"`
	// Routes are the routes, in the order of the file (routes); at
	// least one.
	Routes []*Route `yaml:"routes"`

	node
	file  string
	table *Table
}

// Server holds the HTTP listener's settings.
type Server struct {
	// Listen is the address to serve HTTP and WebSocket on; ":8080" by
	// default.
	Listen string `yaml:"listen"`
	// ReadHeaderTimeout bounds reading a request's headers; 5s by
	// default.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// ReadBodyTimeout bounds reading a request's body, from the end of
	// its headers: a body still arriving then is answered 408 and its
	// connection closed; 30s by default.
	ReadBodyTimeout time.Duration `yaml:"read_body_timeout"`
	// IdleTimeout closes a keep-alive connection idle this long; 2m by
	// default.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// WriteTimeout bounds writing a response (and each message of a
	// stream); by default the longest max_timeout of a route that does
	// not stream, plus 5s. It must not be shorter than any such route's
	// max_timeout.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// MaxBody is the largest request body (413 beyond); 1MiB by default.
	MaxBody Size `yaml:"max_body"`
	// MaxHeaderBytes bounds a request's headers; 64KiB by default.
	MaxHeaderBytes Size `yaml:"max_header_bytes"`
	// TLS, when set, serves HTTPS (and wss) with this certificate.
	TLS *TLS `yaml:"tls"`
	// ShutdownGrace is how long a graceful shutdown drains in-flight
	// requests and WebSocket connections; 10s by default.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// TrustedProxies are the addresses (127.0.0.1) and networks
	// (10.0.0.0/8) of the proxies in front of the gateway: from them, and
	// only from them, X-Forwarded-For names the client that the per-IP
	// rate limit and the access log count. None by default: the peer's
	// address, whatever the header says.
	TrustedProxies []string `yaml:"trusted_proxies"`

	node
}

// TrustedProxyPrefixes returns TrustedProxies as networks (an address is
// a network of one); entries that do not parse (which validation refuses)
// are left out.
func (s *Server) TrustedProxyPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s.TrustedProxies {
		if pre, ok := parseProxy(p); ok {
			out = append(out, pre)
		}
	}
	return out
}

// parseProxy parses an address or a CIDR network.
func parseProxy(s string) (netip.Prefix, bool) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err == nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), true
}

// TLS names PEM files: a certificate chain and its key, and for mutual
// TLS the CA that peers' certificates must chain to.
type TLS struct {
	// CertFile is the certificate chain, PEM. Required.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the certificate's private key, PEM. Required.
	KeyFile string `yaml:"key_file"`
	// CAFile is the CA bundle peers' certificates are verified against
	// (mutual TLS); in server.tls, a client certificate is then
	// required. Optional for server.tls, required for mesh.tls.
	CAFile string `yaml:"ca_file"`
	// ServerName, in mesh.tls only, is the name peers' certificates are
	// verified against instead of the host dialled: for a mesh whose
	// members share a certificate name but not their addresses, such as
	// Kubernetes pods. Optional.
	ServerName string `yaml:"server_name"`

	node
}

// Mesh holds the gateway's settings as a wizard node.
type Mesh struct {
	// Transport is "tcp" (the default) or "quic".
	Transport string `yaml:"transport"`
	// Listen is the transport's address; ":0" (any free port) by
	// default.
	Listen string `yaml:"listen"`
	// GossipListen is the gossip (SWIM) address; "0.0.0.0:7946" by
	// default, swim's.
	GossipListen string `yaml:"gossip_listen"`
	// GossipAdvertise is the gossip address other members reach the
	// gateway at, "ip" or "ip:port", when GossipListen binds every
	// interface; by default the first private address of an interface
	// (a Kubernetes pod sets its IP, through the environment).
	GossipAdvertise string `yaml:"gossip_advertise"`
	// Seeds are gossip addresses of members to join ("host:port", or a
	// host for port 7946).
	Seeds []string `yaml:"seeds"`
	// DNS are names whose A/AAAA or SRV records list members to join.
	DNS []string `yaml:"dns"`
	// Peers are transport addresses of nodes to call without gossip
	// (static peers).
	Peers []string `yaml:"peers"`
	// GossipKey encrypts gossip: 16, 24 or 32 bytes, base64. Give it or
	// GossipKeyFile, not both.
	GossipKey string `yaml:"gossip_key"`
	// GossipKeyFile names a file holding the base64 gossip key.
	GossipKeyFile string `yaml:"gossip_key_file"`
	// Segment puts the gateway in a swim segment (at most 128 bytes).
	Segment string `yaml:"segment"`
	// TLS is the transport's mutual TLS: the gateway's certificate and
	// the CA of the mesh.
	TLS *TLS `yaml:"tls"`
	// Insecure allows gossip without a key and the transport without TLS
	// on addresses other than loopback (see runtime's trust rules).
	Insecure bool `yaml:"insecure"`

	node
}

// Defaults apply to routes that do not set their own.
type Defaults struct {
	// Timeout is a route's call timeout; 2s by default.
	Timeout time.Duration `yaml:"timeout"`
	// MaxTimeout is the most a client's hint may ask for; 10s by
	// default.
	MaxTimeout time.Duration `yaml:"max_timeout"`
	// Auth is a route's authentication: by default [AuthRequired] when
	// the file has an auth section, [AuthNone] when it has none.
	Auth AuthMode `yaml:"auth"`

	node
}

// Auth says how tokens are verified: by JWT keys, or by a delegate
// service in the mesh. Exactly one is set when a route needs auth.
type Auth struct {
	// JWT verifies tokens locally with keys (auth.jwt); nil when absent.
	JWT *JWT `yaml:"jwt"`
	// Delegate verifies tokens by a call into the mesh (auth.delegate);
	// nil when absent.
	Delegate *Delegate `yaml:"delegate"`

	node
}

// JWT verifies JSON Web Tokens with keys from PEM files or a JWKS URL
// (exactly one of the two).
type JWT struct {
	// Keys are PEM files of public keys (RSA, ECDSA, Ed25519), or of
	// HMAC secrets for HS algorithms.
	Keys []string `yaml:"keys"`
	// JWKSURL is a JSON Web Key Set's URL (https, or http on loopback).
	JWKSURL string `yaml:"jwks_url"`
	// Issuer, when set, must equal the token's iss.
	Issuer string `yaml:"issuer"`
	// Audience, when set, must hold one of the token's aud (one value
	// or a list).
	Audience []string `yaml:"audience"`
	// Algorithms is the allow-list of signing algorithms (RS256, ES256,
	// EdDSA, HS256, ...; never "none"). Required.
	Algorithms []string `yaml:"algorithms"`
	// Leeway is the clock skew allowed on exp, nbf and iat; 0 by
	// default.
	Leeway time.Duration `yaml:"leeway"`
	// Refresh is how often the JWKS is fetched again; 5m by default.
	Refresh time.Duration `yaml:"refresh"`
	// AllowNoSubject accepts tokens without a sub claim; false by
	// default: such a token is refused (401).
	AllowNoSubject bool `yaml:"allow_no_subject"`
	// Cache bounds the cache of verified tokens (auth.jwt.cache); nil
	// means the defaults.
	Cache *TokenCache `yaml:"cache"`

	node
}

// TokenCache bounds a verifier's cache of verified tokens, kept by the
// token's SHA-256 until its expiry. A hit repeats the checks that do not
// need the signature (expiry, not-before, the key still in the key set),
// so a key removed from a JWKS stops its cached tokens at the next
// refresh, as it stops uncached ones.
type TokenCache struct {
	// Entries bounds the tokens cached; 10000 by default.
	Entries int `yaml:"entries"`
	// Bytes bounds their estimated size; 16MiB by default.
	Bytes Size `yaml:"bytes"`
	// Off verifies every token in full on every request (auth.jwt only:
	// a delegate's answers are always cached; bound them with max_ttl).
	Off bool `yaml:"off"`
	// MaxTTL bounds how long a delegate's answer is cached, so that a
	// token the auth service revokes stops working before it expires
	// (auth.delegate only); by default until the answer's expires_at.
	MaxTTL time.Duration `yaml:"max_ttl"`

	node
}

// Delegate verifies tokens by calling a pattern in the mesh; answers are
// cached until the token's expiry.
type Delegate struct {
	// Pattern is the pattern to call (no variables). Required.
	Pattern string `yaml:"pattern"`
	// Timeout bounds the call (a timeout fails closed: 503); 500ms by
	// default.
	Timeout time.Duration `yaml:"timeout"`
	// Cache bounds the cache of the pattern's answers
	// (auth.delegate.cache); nil means the defaults.
	Cache *TokenCache `yaml:"cache"`

	node
}

// CORS is the cross-origin policy for browsers' fetches. With no origins,
// cross-origin requests are refused.
type CORS struct {
	// Origins are the allowed origins ("https://app.example.com"), or
	// "*" for any (not with Credentials).
	Origins []string `yaml:"origins"`
	// Methods are the allowed methods; by default those of the routes.
	Methods []string `yaml:"methods"`
	// Headers are the allowed request headers; by default
	// Authorization, Content-Type, X-Request-Id, X-Request-Timeout-Ms.
	Headers []string `yaml:"headers"`
	// Credentials allows cookies and Authorization on cross-origin
	// requests.
	Credentials bool `yaml:"credentials"`
	// MaxAge is how long browsers may cache a preflight; 10m by default.
	MaxAge time.Duration `yaml:"max_age"`

	node
}

// WebSocket enables the multiplexed WebSocket endpoint; it is off when
// the file has no websocket section.
type WebSocket struct {
	// Path is the endpoint's path; "/ws" by default. No route may match
	// it.
	Path string `yaml:"path"`
	// Origins are the allowed Origin headers of an upgrade; by default
	// cors.origins. Requests without Origin (non-browsers) pass.
	Origins []string `yaml:"origins"`
	// MaxMessage is the largest frame (close 1009 beyond); 64KiB by
	// default.
	MaxMessage Size `yaml:"max_message"`
	// MaxInflightPerConn bounds requests in flight per connection (429
	// frames beyond); 64 by default.
	MaxInflightPerConn int `yaml:"max_inflight_per_conn"`
	// MaxStreamsPerConn bounds the streams open per connection (a req
	// frame opening one beyond is answered 429); 16 by default.
	MaxStreamsPerConn int `yaml:"max_streams_per_conn"`
	// SendQueue bounds the replies queued per connection (a slow
	// consumer is closed with 4008); 256 by default.
	SendQueue int `yaml:"send_queue"`
	// MaxSubscriptionsPerConn bounds the event subscriptions open per
	// connection (a sub frame beyond is refused, 429); 32 by default.
	MaxSubscriptionsPerConn int `yaml:"max_subscriptions_per_conn"`
	// EventQueue bounds the events waiting to be written per
	// connection; EventOverflow says what a full queue does. 64 by
	// default.
	EventQueue int `yaml:"event_queue"`
	// EventOverflow is what an event finding a connection's event queue
	// full does: [OverflowDropOldest] (the default) drops the oldest
	// waiting event, [OverflowClose] closes the connection (4008).
	EventOverflow Overflow `yaml:"event_overflow"`
	// PingInterval is how often the server pings; 30s by default.
	PingInterval time.Duration `yaml:"ping_interval"`
	// IdleTimeout closes a connection with no frame for this long; 2m by
	// default.
	IdleTimeout time.Duration `yaml:"idle_timeout"`

	node
}

// Overflow is what a connection's full event queue does with one more
// event.
type Overflow string

// The overflow policies of a connection's event queue.
const (
	// OverflowDropOldest drops the oldest waiting event: a slow client
	// misses events, and hears the newest.
	OverflowDropOldest Overflow = "drop_oldest"
	// OverflowClose closes the connection (4008, slow consumer): a
	// client that must not miss an event reconnects and catches up.
	OverflowClose Overflow = "close"
)

// RateLimits are token buckets per client IP and per verified subject;
// each is off when absent.
type RateLimits struct {
	// PerIP limits each client IP address; nil: no limit.
	PerIP *Limit `yaml:"per_ip"`
	// PerSubject limits each verified token subject; nil: no limit. It
	// needs an auth section.
	PerSubject *Limit `yaml:"per_subject"`

	node
}

// Limit is a token bucket: Rate refills it, Burst is its size.
type Limit struct {
	// Rate is the sustained rate (100/s, 6000/m). Required.
	Rate Rate `yaml:"rate"`
	// Burst is the bucket's size; by default the rate's count.
	Burst int `yaml:"burst"`

	node
}

// AccessLog is the structured access log: one line per request (and per
// WebSocket frame request).
type AccessLog struct {
	// Enabled turns the log on; true by default.
	Enabled bool `yaml:"enabled"`
	// Format is "json" (the default) or "text" (slog's handlers).
	Format string `yaml:"format"`
	// Output is "stderr" (the default), "stdout" or a file path.
	Output string `yaml:"output"`

	node
}

// Table returns the compiled route table.
func (c *Config) Table() *Table { return c.table }

// File returns the name the configuration was parsed under.
func (c *Config) File() string { return c.file }

// hasAuth reports whether the file says how to verify tokens.
func (c *Config) hasAuth() bool { return c.Auth.JWT != nil || c.Auth.Delegate != nil }
