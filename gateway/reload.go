package gateway

import (
	"errors"
	"fmt"
	"io"

	"github.com/wizardmesh/wizard/gateway/config"
)

// Reload applies cfg as one: the routes, CORS, rate limits, auth (a
// verifier built anew from cfg's auth section, unless [WithVerifier]
// gave one), the body bounds, trusted proxies, the access log's switch
// and the WebSocket endpoint (connections opened from then on). A request
// is served throughout by what it started with; nothing is half-applied.
//
// The listener's settings (server.listen, read_header_timeout,
// write_timeout, idle_timeout, max_header_bytes, shutdown_grace, tls)
// cannot change while serving: those cfg changes keep their old values
// and restart names them ("server.listen"), for the caller to say that
// they need a restart. A cfg that cannot be applied (its verifier does
// not build) changes nothing and is an error.
func (g *Gateway) Reload(cfg *config.Config) (restart []string, err error) {
	if cfg == nil || cfg.Table() == nil {
		return nil, errors.New("wizard: gateway: Reload: a nil or unparsed configuration")
	}
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	old := g.now()
	ct := newConfigTable(cfg.Table())
	next := &live{t: ct, set: g.reloadedSettings(cfg), auth: old.auth}
	next.setEvents(eventRoutesOf(ct))
	next.ipLim = reuseLimiter(old.ipLim, old.set.perIP, next.set.perIP)
	next.subLim = reuseLimiter(old.subLim, old.set.perSubject, next.set.perSubject)
	var built io.Closer
	if g.ownAuth {
		v, closer, err := verifierOf(g.node, cfg.Auth)
		if err != nil {
			return nil, fmt.Errorf("wizard: gateway: Reload: auth: %w", err)
		}
		next.auth, built = nil, closer
		if v != nil {
			next.auth = authVerifier{v}
		}
	}
	g.mu.Lock()
	if g.closing.Load() {
		g.mu.Unlock()
		closeQuietly(built)
		return nil, errors.New("wizard: gateway: Reload: the gateway is closed")
	}
	g.cur.Store(next)
	var retired []io.Closer
	if g.ownAuth {
		retired, g.closers = g.closers, []io.Closer{built}
	}
	restart = restartNeeded(g.cfg, cfg)
	g.cfg = cfg
	g.mu.Unlock()
	for _, c := range retired {
		closeQuietly(c)
	}
	return restart, nil
}

// reloadedSettings are cfg's settings with the gateway's options over
// them, as New made them.
func (g *Gateway) reloadedSettings(cfg *config.Config) settings {
	s := settingsOf(cfg).withDefaults()
	if g.opts.grace > 0 {
		s.grace = g.opts.grace
	}
	if g.opts.bodyWait > 0 {
		s.readBodyTimeout = g.opts.bodyWait
	}
	return s
}

// reuseLimiter keeps a limiter (and its buckets) whose rate did not
// change.
func reuseLimiter(l *limiter, was, now rateSpec) *limiter {
	if was == now {
		return l
	}
	return newLimiter(now, 0)
}

// restartNeeded names the listener's settings that differ from was
// (nil: none known) to now.
func restartNeeded(was, now *config.Config) []string {
	if was == nil {
		return nil
	}
	a, b := &was.Server, &now.Server
	var out []string
	for _, d := range []struct {
		name string
		same bool
	}{
		{"server.listen", a.Listen == b.Listen},
		{"server.read_header_timeout", a.ReadHeaderTimeout == b.ReadHeaderTimeout},
		{"server.write_timeout", a.WriteTimeout == b.WriteTimeout},
		{"server.idle_timeout", a.IdleTimeout == b.IdleTimeout},
		{"server.max_header_bytes", a.MaxHeaderBytes == b.MaxHeaderBytes},
		{"server.shutdown_grace", a.ShutdownGrace == b.ShutdownGrace},
		{"server.tls", tlsFiles(a.TLS) == tlsFiles(b.TLS)},
	} {
		if !d.same {
			out = append(out, d.name)
		}
	}
	return out
}

func tlsFiles(t *config.TLS) [3]string {
	if t == nil {
		return [3]string{}
	}
	return [3]string{t.CertFile, t.KeyFile, t.CAFile}
}

func closeQuietly(c io.Closer) {
	if c != nil {
		c.Close()
	}
}
