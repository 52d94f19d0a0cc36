package gateway

import (
	"errors"
	"fmt"
	"io"
	"net/url"

	"github.com/wizardmesh/wizard/gateway/auth"
	"github.com/wizardmesh/wizard/gateway/config"
	"github.com/wizardmesh/wizard/runtime"
)

// New returns a gateway in front of node with cfg's routes, limits, CORS,
// WebSocket endpoint and auth (a JWT verifier, or delegation to an auth
// pattern called through node, unless [WithVerifier] gives one). cfg is
// a parsed configuration ([config.Load]); the gateway keeps its route
// table until [Gateway.Reload]. The node must already be running; it
// stays the caller's to close after the gateway.
func New(node *runtime.Node, cfg *config.Config, opts ...Option) (*Gateway, error) {
	if cfg == nil || cfg.Table() == nil {
		return nil, errors.New("wizard: gateway: New: a nil or unparsed configuration (use config.Load or config.Parse)")
	}
	set := settingsOf(cfg)
	var built io.Closer
	ownAuth := !hasVerifier(opts)
	if ownAuth {
		v, closer, err := verifierOf(node, cfg.Auth)
		if err != nil {
			return nil, fmt.Errorf("wizard: gateway: New: auth: %w", err)
		}
		if v != nil {
			opts = append([]Option{WithVerifier(v)}, opts...)
		}
		built = closer
	}
	if t := cfg.Server.TLS; t != nil && t.CertFile != "" {
		opts = append([]Option{WithTLSFiles(t.CertFile, t.KeyFile)}, opts...)
	}
	ct := newConfigTable(cfg.Table())
	g, err := newGateway(node, ct, set, opts...)
	if err != nil {
		if built != nil {
			built.Close()
		}
		return nil, err
	}
	g.now().setEvents(eventRoutesOf(ct)) // before it serves: nothing reads it yet
	g.closers = append(g.closers, built)
	g.cfg, g.ownAuth = cfg, ownAuth
	return g, nil
}

func hasVerifier(opts []Option) bool {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	return o.verifier != nil
}

// settingsOf reads the gateway's settings from cfg (its defaults applied
// by the config package).
func settingsOf(cfg *config.Config) settings {
	s := settings{
		maxBody:           int64(cfg.Server.MaxBody),
		maxHeaderBytes:    int(cfg.Server.MaxHeaderBytes),
		readHeaderTimeout: cfg.Server.ReadHeaderTimeout,
		readBodyTimeout:   cfg.Server.ReadBodyTimeout,
		writeTimeout:      cfg.Server.WriteTimeout,
		idleTimeout:       cfg.Server.IdleTimeout,
		grace:             cfg.Server.ShutdownGrace,
		maxTimeout:        cfg.Defaults.MaxTimeout,
		accessLog:         cfg.AccessLog.Enabled,
		cors: corsPolicy{
			origins: cfg.CORS.Origins, methods: cfg.CORS.Methods, headers: cfg.CORS.Headers,
			credentials: cfg.CORS.Credentials, maxAge: cfg.CORS.MaxAge,
		},
		perIP:          rateOf(cfg.RateLimits.PerIP),
		perSubject:     rateOf(cfg.RateLimits.PerSubject),
		trustedProxies: cfg.Server.TrustedProxyPrefixes(),
	}
	if ws := cfg.WebSocket; ws != nil {
		s.ws = wsSettings{path: ws.Path, origins: ws.Origins, maxMessage: int64(ws.MaxMessage), maxInflight: ws.MaxInflightPerConn, maxStreams: ws.MaxStreamsPerConn, sendQueue: ws.SendQueue, ping: ws.PingInterval, idle: ws.IdleTimeout,
			maxSubs: ws.MaxSubscriptionsPerConn, eventQueue: ws.EventQueue, eventClose: ws.EventOverflow == config.OverflowClose}
	}
	return s
}

func rateOf(l *config.Limit) rateSpec {
	if l == nil || l.Rate.Count <= 0 || l.Rate.Per <= 0 {
		return rateSpec{}
	}
	return rateSpec{rate: float64(l.Rate.Count) / l.Rate.Per.Seconds(), burst: l.Burst}
}

// verifierOf builds the verifier cfg's auth section describes (nil for
// none) and what closes it.
func verifierOf(node *runtime.Node, a config.Auth) (auth.Verifier, io.Closer, error) {
	switch {
	case a.JWT != nil:
		o := auth.JWTOptions{
			Keys: keysOf(a.JWT.Keys), JWKSURL: a.JWT.JWKSURL, JWKSRefresh: a.JWT.Refresh,
			Algorithms: a.JWT.Algorithms, Issuer: a.JWT.Issuer, Audience: a.JWT.Audience, Leeway: a.JWT.Leeway,
			AllowNoSubject: a.JWT.AllowNoSubject,
		}
		if c := a.JWT.Cache; c != nil {
			o.CacheEntries, o.CacheBytes, o.NoCache = c.Entries, int(c.Bytes), c.Off
		}
		j, err := auth.NewJWT(o)
		if err != nil {
			return nil, nil, err
		}
		return j, j, nil
	case a.Delegate != nil:
		o := auth.DelegateOptions{Caller: node, Pattern: a.Delegate.Pattern, Timeout: a.Delegate.Timeout}
		if c := a.Delegate.Cache; c != nil {
			o.CacheEntries, o.CacheBytes, o.MaxCacheTTL = c.Entries, int(c.Bytes), c.MaxTTL
		}
		d, err := auth.NewDelegate(o)
		if err != nil {
			return nil, nil, err
		}
		return d, d, nil
	}
	return nil, nil, nil
}

// keysOf names the configuration's key files (auth.Key.File: PEM public
// keys, or HMAC secrets).
func keysOf(files []string) []auth.Key {
	keys := make([]auth.Key, len(files))
	for i, f := range files {
		keys[i] = auth.Key{File: f}
	}
	return keys
}

// configTable is the gateway's view of a [config.Table]: the policy of
// each route, made once per table.
type configTable struct {
	t        *config.Table
	policies map[*config.Route]*policy
}

func newConfigTable(t *config.Table) *configTable {
	ct := &configTable{t: t, policies: make(map[*config.Route]*policy)}
	for _, r := range t.Routes() {
		p := &policy{name: r.Name, scopes: r.Scopes, timeout: r.Timeout, maxTimeout: r.MaxTimeout, stream: streamKindOf(r.Stream)}
		switch r.Auth {
		case config.AuthOptional:
			p.auth = authOptional
		case config.AuthNone:
			p.auth = authNone
		default:
			p.auth = authRequired
		}
		if p.timeout <= 0 && p.stream == streamNone {
			p.timeout = defaultTimeout
		}
		if p.maxTimeout < p.timeout {
			p.maxTimeout = max(p.timeout, defaultMaxTimeout)
		}
		ct.policies[r] = p
	}
	return ct
}

func (ct *configTable) lookup(method, path string) (match, *apiError) {
	m, err := ct.t.Match(method, path)
	if err != nil {
		return match{}, requestError(err)
	}
	return match{policy: ct.policies[m.Route], pattern: m.Pattern, msg: configMessage{m}}, nil
}

// configMessage builds the message of a config.Match (one pointer: held
// in an interface, it is not allocated again).
type configMessage struct{ m *config.Match }

func (c configMessage) message(q url.Values, body []byte) (any, *apiError) {
	msg, err := c.m.Message(q, body)
	if err != nil {
		return nil, requestError(err)
	}
	return msg, nil
}

func (c configMessage) appendMessageJSON(dst []byte, q url.Values, body []byte) ([]byte, bool) {
	return c.m.AppendMessageJSON(dst, q, body)
}

// requestError is the status table's row of a config.RequestError.
func requestError(err error) *apiError {
	var re *config.RequestError
	if !errors.As(err, &re) {
		return badRequest("the request cannot be routed")
	}
	e := newAPIError(re.Status, re.Code, re.Message)
	e.allow = re.AllowHeader()
	return e
}

var _ table = (*configTable)(nil)
