package config

import (
	"encoding/base64"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wizardmesh/wizard/runtime/pattern"
)

// The defaults of the file's settings (see each field's doc).
const (
	DefaultListen            = ":8080"
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadBodyTimeout   = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultMaxBody           = 1 << 20
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultShutdownGrace     = 10 * time.Second
	DefaultTimeout           = 2 * time.Second
	DefaultMaxTimeout        = 10 * time.Second
	DefaultWebSocketPath     = "/ws"
)

func (v *validator) server(s *Server) {
	if !s.has("listen") {
		s.Listen = DefaultListen
	} else {
		v.hostPort(&s.node, "server", "listen", s.Listen)
	}
	v.positive(&s.node, "server", "read_header_timeout", &s.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	v.positive(&s.node, "server", "read_body_timeout", &s.ReadBodyTimeout, DefaultReadBodyTimeout)
	v.positive(&s.node, "server", "idle_timeout", &s.IdleTimeout, DefaultIdleTimeout)
	if s.has("write_timeout") && s.WriteTimeout <= 0 {
		v.add(s.at("write_timeout"), "server.write_timeout", "must be positive")
	}
	v.size(&s.node, "server", "max_body", &s.MaxBody, DefaultMaxBody)
	v.size(&s.node, "server", "max_header_bytes", &s.MaxHeaderBytes, DefaultMaxHeaderBytes)
	v.positive(&s.node, "server", "shutdown_grace", &s.ShutdownGrace, DefaultShutdownGrace)
	if s.TLS != nil {
		v.tls(s.TLS, "server.tls", false)
	}
	for i, p := range s.TrustedProxies {
		if _, ok := parseProxy(p); !ok {
			v.add(s.at("trusted_proxies"), "server.trusted_proxies["+strconv.Itoa(i)+"]", "%s is not an IP address or a CIDR network (10.0.0.0/8)", strconv.Quote(p))
		}
	}
}

// writeTimeout applies the write timeout's default, which depends on the
// routes, and refuses one shorter than a route's max_timeout. Streaming
// routes take no part: the write timeout bounds each of a stream's
// messages, not the stream.
func (v *validator) writeTimeout(s *Server) {
	var longest *Route
	for _, r := range v.c.Routes {
		if r != nil && r.Stream == "" && (longest == nil || r.MaxTimeout > longest.MaxTimeout) {
			longest = r
		}
	}
	if longest == nil {
		return
	}
	if !s.has("write_timeout") {
		s.WriteTimeout = longest.MaxTimeout + 5*time.Second
		return
	}
	if s.WriteTimeout > 0 && s.WriteTimeout < longest.MaxTimeout {
		v.add(s.at("write_timeout"), "server.write_timeout", "%v is shorter than the max_timeout %v of %s: its replies would be cut", s.WriteTimeout, longest.MaxTimeout, routeRef(longest))
	}
}

func (v *validator) size(n *node, where, key string, z *Size, def Size) {
	if !n.has(key) {
		*z = def
		return
	}
	if *z <= 0 {
		v.add(n.at(key), join(where, key), "must be positive")
	}
}

// hostPort checks a listening address "host:port" (the host may be a
// name, or empty for every interface).
func (v *validator) hostPort(n *node, where, key, addr string) {
	if reason := checkHostPort(addr, false); reason != "" {
		v.add(n.at(key), join(where, key), "%s: %s", strconv.Quote(addr), reason)
	}
}

// checkAdvertise checks an advertised address, "ip" or "ip:port".
func checkAdvertise(addr string) string {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		if reason := checkHostPort(addr, true); reason != "" {
			return reason
		}
		host = h
	}
	if net.ParseIP(host) == nil {
		return "want an IP address, or ip:port"
	}
	return ""
}

// checkHostPort checks "host:port"; the host may be empty (every
// interface) unless needHost.
func checkHostPort(addr string, needHost bool) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		if needHost {
			return "want host:port"
		}
		return "want host:port (or :port for every interface)"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return "bad port " + strconv.Quote(port)
	}
	if host == "" && needHost {
		return "no host"
	}
	if host != "" && net.ParseIP(host) == nil && !isHostName(host) {
		return "bad host " + strconv.Quote(host)
	}
	return ""
}

// isHostName reports whether s is a DNS name (letters, digits, '-' and
// '.', labels of 1 to 63 bytes).
func isHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for l := range strings.SplitSeq(strings.TrimSuffix(s, "."), ".") {
		if l == "" || len(l) > 63 {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

func (v *validator) tls(t *TLS, where string, needCA bool) {
	if t.broken {
		return
	}
	if t.CertFile == "" && !t.bad["cert_file"] {
		v.add(t.start, where, "cert_file is required")
	}
	if t.KeyFile == "" && !t.bad["key_file"] {
		v.add(t.start, where, "key_file is required")
	}
	if needCA && t.CAFile == "" && !t.bad["ca_file"] {
		v.add(t.start, where, "ca_file is required (the CA of the mesh's certificates)")
	}
	if !needCA && t.has("server_name") {
		v.add(t.at("server_name"), where, "server_name applies to mesh.tls only (the name the mesh's peers are verified against)")
	}
}

func (v *validator) mesh(m *Mesh) {
	switch {
	case !m.has("transport"):
		m.Transport = "tcp"
	case m.Transport != "tcp" && m.Transport != "quic":
		v.add(m.at("transport"), "mesh.transport", "want tcp or quic, got %s", strconv.Quote(m.Transport))
	}
	if !m.has("listen") {
		m.Listen = ":0"
	} else {
		v.hostPort(&m.node, "mesh", "listen", m.Listen)
	}
	if !m.has("gossip_listen") {
		m.GossipListen = "0.0.0.0:7946"
	} else {
		v.hostPort(&m.node, "mesh", "gossip_listen", m.GossipListen)
	}
	if m.has("gossip_advertise") {
		if reason := checkAdvertise(m.GossipAdvertise); reason != "" {
			v.add(m.at("gossip_advertise"), "mesh.gossip_advertise", "%s: %s", strconv.Quote(m.GossipAdvertise), reason)
		}
	}
	for i, s := range m.Seeds {
		if reason := checkSeed(s); reason != "" {
			v.add(m.at("seeds"), "mesh.seeds["+strconv.Itoa(i)+"]", "%s: %s", strconv.Quote(s), reason)
		}
	}
	for i, s := range m.DNS {
		name := s
		if h, _, err := net.SplitHostPort(s); err == nil {
			name = h
		}
		if !isHostName(name) {
			v.add(m.at("dns"), "mesh.dns["+strconv.Itoa(i)+"]", "%s is not a DNS name (or name:port)", strconv.Quote(s))
		}
	}
	for i, p := range m.Peers {
		if reason := checkHostPort(p, true); reason != "" {
			v.add(m.at("peers"), "mesh.peers["+strconv.Itoa(i)+"]", "%s: %s", strconv.Quote(p), reason)
		}
	}
	switch {
	case m.has("gossip_key") && m.has("gossip_key_file"):
		v.add(m.at("gossip_key_file"), "mesh", "gossip_key and gossip_key_file exclude each other; give one")
	case m.has("gossip_key"):
		if reason := checkGossipKey(m.GossipKey); reason != "" {
			v.add(m.at("gossip_key"), "mesh.gossip_key", "%s", reason)
		}
	case m.has("gossip_key_file") && m.GossipKeyFile == "":
		v.add(m.at("gossip_key_file"), "mesh.gossip_key_file", "empty file name")
	}
	if len(m.Segment) > 128 {
		v.add(m.at("segment"), "mesh.segment", "%d bytes; the limit is 128", len(m.Segment))
	}
	if m.TLS != nil {
		v.tls(m.TLS, "mesh.tls", true)
	}
}

func checkSeed(s string) string {
	if _, _, err := net.SplitHostPort(s); err != nil {
		if isHostName(s) || net.ParseIP(s) != nil {
			return ""
		}
		return "want host:port or a host"
	}
	return checkHostPort(s, true)
}

// checkGossipKey checks a base64 key of 16, 24 or 32 bytes; the reason
// never repeats the key.
func checkGossipKey(k string) string {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(k))
	if err != nil {
		return "not base64 (standard alphabet, padded)"
	}
	switch len(b) {
	case 16, 24, 32:
		return ""
	}
	return "the key is " + strconv.Itoa(len(b)) + " bytes; a key is 16, 24 or 32 bytes (AES-128, -192, -256)"
}

func (v *validator) defaults(d *Defaults) {
	v.positive(&d.node, "defaults", "timeout", &d.Timeout, DefaultTimeout)
	v.positive(&d.node, "defaults", "max_timeout", &d.MaxTimeout, DefaultMaxTimeout)
	if d.Timeout > d.MaxTimeout && d.MaxTimeout > 0 {
		v.add(d.at("timeout"), "defaults.timeout", "%v is longer than max_timeout %v", d.Timeout, d.MaxTimeout)
	}
	switch {
	case !d.has("auth") && v.c.hasAuth():
		d.Auth = AuthRequired
	case !d.has("auth"):
		d.Auth = AuthNone
	case !validAuth(d.Auth):
		v.add(d.at("auth"), "defaults.auth", "want required, optional or none, got %s", strconv.Quote(string(d.Auth)))
		d.Auth = AuthNone
	case d.Auth.needsAuth() && !v.c.hasAuth():
		v.add(d.at("auth"), "defaults.auth", "%s needs an auth section (auth.jwt or auth.delegate)", d.Auth)
	}
}

// The signing algorithms a JWT allow-list may name.
var jwtAlgorithms = []string{
	"HS256", "HS384", "HS512", "RS256", "RS384", "RS512",
	"PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
}

func (v *validator) auth(a *Auth) {
	if a.JWT != nil && a.Delegate != nil {
		v.add(a.at("delegate"), "auth", "jwt and delegate exclude each other; give one")
	}
	if j := a.JWT; j != nil && !j.broken {
		v.jwt(j)
	}
	if dl := a.Delegate; dl != nil && !dl.broken {
		if dl.Pattern == "" && !dl.bad["pattern"] {
			v.add(dl.start, "auth.delegate", "pattern is required")
		} else if p, err := pattern.Parse(dl.Pattern); err != nil {
			v.add(dl.at("pattern"), "auth.delegate.pattern", "%v", strings.TrimPrefix(err.Error(), "wizard: "))
		} else if p.Len() == 0 || p.HasGlob() || strings.ContainsAny(dl.Pattern, "{}") {
			v.add(dl.at("pattern"), "auth.delegate.pattern", "want a pattern of fixed values, got %s", strconv.Quote(dl.Pattern))
		}
		v.positive(&dl.node, "auth.delegate", "timeout", &dl.Timeout, 500*time.Millisecond)
		if c := dl.Cache; c != nil && !c.broken {
			v.tokenCache(c, "auth.delegate.cache", false)
		}
	}
}

// tokenCache checks a verifier's cache bounds; jwt says whose (off is
// the JWT verifier's, max_ttl the delegate's).
func (v *validator) tokenCache(c *TokenCache, where string, jwt bool) {
	if c.has("entries") && c.Entries <= 0 {
		v.add(c.at("entries"), where+".entries", "%d: must be positive (to verify every token in full, set off: true)", c.Entries)
	}
	if c.has("bytes") && c.Bytes <= 0 {
		v.add(c.at("bytes"), where+".bytes", "must be positive (to verify every token in full, set off: true)")
	}
	if c.Bytes > 1<<40 {
		v.add(c.at("bytes"), where+".bytes", "%v is more than 1TiB", c.Bytes)
	}
	if jwt && c.has("max_ttl") {
		v.add(c.at("max_ttl"), where+".max_ttl", "max_ttl applies to auth.delegate.cache only: a JWT is cached until its exp, and its key's removal from the JWKS ends it at the next refresh")
	}
	if !jwt && c.Off {
		v.add(c.at("off"), where+".off", "off applies to auth.jwt.cache only: a delegate's answers are always cached; bound how long with max_ttl")
	}
	if !jwt && c.has("max_ttl") && c.MaxTTL <= 0 {
		v.add(c.at("max_ttl"), where+".max_ttl", "must be positive")
	}
	if jwt && c.Off && (c.has("entries") || c.has("bytes")) {
		v.add(c.at("off"), where+".off", "off with entries or bytes: give one")
	}
}

func (v *validator) jwt(j *JWT) {
	const w = "auth.jwt"
	switch {
	case len(j.Keys) > 0 && j.JWKSURL != "":
		v.add(j.at("jwks_url"), w, "keys and jwks_url exclude each other; give one")
	case len(j.Keys) == 0 && j.JWKSURL == "" && !j.bad["keys"] && !j.bad["jwks_url"]:
		v.add(j.start, w, "give keys (PEM files) or jwks_url")
	case j.JWKSURL != "":
		if reason := checkJWKSURL(j.JWKSURL); reason != "" {
			v.add(j.at("jwks_url"), w+".jwks_url", "%s: %s", strconv.Quote(j.JWKSURL), reason)
		}
	}
	for i, k := range j.Keys {
		if k == "" {
			v.add(j.at("keys"), w+".keys["+strconv.Itoa(i)+"]", "empty file name")
		}
	}
	if len(j.Algorithms) == 0 && !j.bad["algorithms"] {
		v.add(j.start, w, "algorithms is required: the allow-list of signing algorithms, e.g. [RS256]")
	}
	for i, a := range j.Algorithms {
		ww := w + ".algorithms[" + strconv.Itoa(i) + "]"
		switch {
		case strings.EqualFold(a, "none"):
			v.add(j.at("algorithms"), ww, `"none" is never allowed: tokens must be signed`)
		case !slices.Contains(jwtAlgorithms, a):
			v.add(j.at("algorithms"), ww, "unknown algorithm %s; known: %s", strconv.Quote(a), strings.Join(jwtAlgorithms, ", "))
		case slices.Index(j.Algorithms, a) < i:
			v.add(j.at("algorithms"), ww, "%s is listed twice", a)
		}
	}
	hs := slices.ContainsFunc(j.Algorithms, func(a string) bool { return strings.HasPrefix(a, "HS") })
	asym := slices.ContainsFunc(j.Algorithms, func(a string) bool { return !strings.HasPrefix(a, "HS") })
	if hs && asym {
		v.add(j.at("algorithms"), w+".algorithms", "HS and public-key algorithms mixed: a public key could then be used as an HMAC secret; give one kind")
	}
	if hs && j.JWKSURL != "" {
		v.add(j.at("algorithms"), w+".algorithms", "HS algorithms need secrets from keys files, not a JWKS")
	}
	if j.has("issuer") && j.Issuer == "" {
		v.add(j.at("issuer"), w+".issuer", "empty")
	}
	for i, a := range j.Audience {
		if a == "" {
			v.add(j.at("audience"), w+".audience["+strconv.Itoa(i)+"]", "empty")
		}
	}
	if !j.has("refresh") {
		j.Refresh = 5 * time.Minute
	} else if j.Refresh < time.Second {
		v.add(j.at("refresh"), w+".refresh", "%v is below the 1s minimum", j.Refresh)
	}
	if c := j.Cache; c != nil && !c.broken {
		v.tokenCache(c, w+".cache", true)
	}
}

func checkJWKSURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "want an absolute https URL"
	}
	switch u.Scheme {
	case "https":
		return ""
	case "http":
		if ip := net.ParseIP(u.Hostname()); u.Hostname() == "localhost" || ip != nil && ip.IsLoopback() {
			return ""
		}
		return "http only on loopback; use https"
	}
	return "want an https URL"
}

// defaultHeaders are the request headers CORS allows by default.
var defaultHeaders = []string{"Authorization", "Content-Type", "X-Request-Id", "X-Request-Timeout-Ms"}

func (v *validator) cors(c *CORS) {
	v.origins(&c.node, "cors", c.Origins)
	if c.Credentials && slices.Contains(c.Origins, "*") {
		v.add(c.at("credentials"), "cors.credentials", `credentials with origin "*": browsers refuse it; list the origins`)
	}
	for i, m := range c.Methods {
		if !isToken(m) || strings.ToUpper(m) != m {
			v.add(c.at("methods"), "cors.methods["+strconv.Itoa(i)+"]", "bad method %s (upper-case token)", strconv.Quote(m))
		}
	}
	if !c.has("headers") {
		c.Headers = slices.Clone(defaultHeaders)
	}
	for i, h := range c.Headers {
		if !isToken(h) && h != "*" {
			v.add(c.at("headers"), "cors.headers["+strconv.Itoa(i)+"]", "bad header name %s", strconv.Quote(h))
		}
	}
	if !c.has("max_age") {
		c.MaxAge = 10 * time.Minute
	}
}

// corsMethods fills cors.methods's default: the routes' methods.
func (v *validator) corsMethods(c *CORS) {
	if c.has("methods") {
		return
	}
	c.Methods = nil
	for _, r := range v.c.Routes {
		if r == nil {
			continue
		}
		for _, m := range r.Methods {
			if !slices.Contains(c.Methods, m) {
				c.Methods = append(c.Methods, m)
			}
		}
	}
}

// origins checks a list of origins: "*", or scheme://host[:port].
func (v *validator) origins(n *node, where string, origins []string) {
	for i, o := range origins {
		w := where + ".origins[" + strconv.Itoa(i) + "]"
		if o == "*" {
			if len(origins) > 1 {
				v.add(n.at("origins"), w, `"*" among other origins; give "*" alone`)
			}
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			v.add(n.at("origins"), w, "%s is not an origin (scheme://host[:port], no path)", strconv.Quote(o))
		}
	}
}

func (v *validator) websocket(ws *WebSocket) {
	if ws == nil {
		return
	}
	const w = "websocket"
	if !ws.has("path") {
		ws.Path = DefaultWebSocketPath
	} else if t, err := parsePath(ws.Path); err != nil || len(t.vars) > 0 {
		v.add(ws.at("path"), w+".path", "%s: want a literal path like /ws", strconv.Quote(ws.Path))
		return
	}
	if !ws.has("origins") {
		ws.Origins = slices.Clone(v.c.CORS.Origins)
	} else {
		v.origins(&ws.node, w, ws.Origins)
	}
	v.size(&ws.node, w, "max_message", &ws.MaxMessage, 64<<10)
	v.count(&ws.node, w, "max_inflight_per_conn", &ws.MaxInflightPerConn, 64)
	v.count(&ws.node, w, "max_streams_per_conn", &ws.MaxStreamsPerConn, 16)
	v.count(&ws.node, w, "send_queue", &ws.SendQueue, 256)
	v.count(&ws.node, w, "max_subscriptions_per_conn", &ws.MaxSubscriptionsPerConn, 32)
	v.count(&ws.node, w, "event_queue", &ws.EventQueue, 64)
	switch {
	case !ws.has("event_overflow"):
		ws.EventOverflow = OverflowDropOldest
	case ws.EventOverflow != OverflowDropOldest && ws.EventOverflow != OverflowClose:
		v.add(ws.at("event_overflow"), w+".event_overflow", "want drop_oldest or close, got %s", strconv.Quote(string(ws.EventOverflow)))
	}
	v.positive(&ws.node, w, "ping_interval", &ws.PingInterval, 30*time.Second)
	v.positive(&ws.node, w, "idle_timeout", &ws.IdleTimeout, 2*time.Minute)
	if ws.IdleTimeout <= ws.PingInterval && ws.IdleTimeout > 0 {
		v.add(ws.at("idle_timeout"), w+".idle_timeout", "%v is not longer than ping_interval %v: idle connections would close between pings", ws.IdleTimeout, ws.PingInterval)
	}
	for _, r := range v.c.Routes {
		if r != nil && r.path != nil && len(r.Methods) > 0 && routeMatches(r, ws.Path) {
			v.add(ws.at("path"), w+".path", "%s is matched by %s; the WebSocket endpoint needs a path of its own", ws.Path, routeRef(r))
			break
		}
	}
}

// routeMatches reports whether r's path template matches path.
func routeMatches(r *Route, path string) bool {
	if checkPath(path) != nil {
		return false
	}
	t := newTable([]*Route{r})
	found, _ := t.trees[r.Methods[0]].find(path, start(path), nil)
	return found != nil
}

func (v *validator) count(n *node, where, key string, c *int, def int) {
	if !n.has(key) {
		*c = def
		return
	}
	if *c <= 0 {
		v.add(n.at(key), join(where, key), "must be positive")
	}
}

func (v *validator) rateLimits(rl *RateLimits) {
	for _, l := range []struct {
		key string
		l   *Limit
	}{{"per_ip", rl.PerIP}, {"per_subject", rl.PerSubject}} {
		if l.l == nil || l.l.broken {
			continue
		}
		w := "rate_limits." + l.key
		if !l.l.given("rate") {
			v.add(l.l.start, w, "rate is required (like 100/s)")
		}
		if !l.l.has("burst") {
			l.l.Burst = max(l.l.Rate.Count, 1)
		} else if l.l.Burst <= 0 {
			v.add(l.l.at("burst"), w+".burst", "must be positive")
		}
	}
	if rl.PerSubject != nil && !v.c.hasAuth() {
		v.add(rl.at("per_subject"), "rate_limits.per_subject", "needs an auth section: subjects come from verified tokens")
	}
}

func (v *validator) accessLog(a *AccessLog) {
	if !a.has("enabled") {
		a.Enabled = true
	}
	switch {
	case !a.has("format"):
		a.Format = "json"
	case a.Format != "json" && a.Format != "text":
		v.add(a.at("format"), "access_log.format", "want json or text, got %s", strconv.Quote(a.Format))
	}
	switch {
	case !a.has("output"):
		a.Output = "stderr"
	case a.Output == "":
		v.add(a.at("output"), "access_log.output", `empty; want "stderr", "stdout" or a file path`)
	}
}
