package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wizardmesh/wizard/gateway/config"
	"github.com/wizardmesh/wizard/runtime"
)

// Gateway serves HTTP and WebSocket on one [http.Handler] and calls into
// the mesh through its node. Make one with [New]; serve it with
// [Gateway.Serve] or mount it as a handler; stop it with
// [Gateway.Shutdown].
type Gateway struct {
	node *runtime.Node
	cur  atomic.Pointer[live] // what a reload replaces
	set  settings             // as made: the listener's settings, which a reload keeps
	log  *slog.Logger
	opts options
	cfg  *config.Config // the configuration last applied (nil: none), under mu

	ownAuth  bool       // the verifier is the configuration's, rebuilt by a reload
	reloadMu sync.Mutex // one reload at a time

	closers   []io.Closer // what New or a reload built (the verifier), closed by Close; under mu
	closeOnce sync.Once

	closing atomic.Bool
	mu      sync.Mutex
	servers []*http.Server
	conns   map[*wsConn]struct{}
	connWG  sync.WaitGroup
	events  *eventHub
}

var _ http.Handler = (*Gateway)(nil)

// live is what the gateway reads per request and a reload replaces as
// one: a request takes it once and is served by it throughout.
type live struct {
	t      table
	set    settings
	auth   verifier // nil: no verifier
	ipLim  *limiter
	subLim *limiter
	// events are the routes that allow event subscriptions, claims the
	// claims their templates read.
	events []eventRoute
	claims []string
}

func (l *live) setEvents(routes []eventRoute) {
	l.events, l.claims = routes, eventClaims(routes)
}

// newGateway is New's body, from the gateway's own types.
func newGateway(node *runtime.Node, t table, set settings, opts ...Option) (*Gateway, error) {
	if node == nil {
		return nil, errors.New("wizard: gateway: New: the node cannot be nil")
	}
	var o options
	for _, opt := range opts {
		if opt == nil {
			return nil, errors.New("wizard: gateway: New: a nil Option")
		}
		if err := opt.apply(&o); err != nil {
			return nil, err
		}
	}
	if o.log == nil {
		o.log = slog.New(warnOnly{slog.Default().Handler()})
	}
	set = set.withDefaults()
	if o.grace > 0 {
		set.grace = o.grace
	}
	if o.bodyWait > 0 {
		set.readBodyTimeout = o.bodyWait
	}
	g := &Gateway{node: node, set: set, log: o.log, opts: o, conns: make(map[*wsConn]struct{}), events: newEventHub(node, o.log)}
	g.cur.Store(&live{t: t, set: set, auth: o.verifier, ipLim: newLimiter(set.perIP, 0), subLim: newLimiter(set.perSubject, 0)})
	return g, nil
}

// warnOnly passes Warn and above to its handler: the default logger's
// level is not the gateway's business, but its Info access log would
// flood a program that configured nothing.
type warnOnly struct{ slog.Handler }

func (w warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}

// ServeHTTP serves one request: /healthz, /readyz, the WebSocket path, a
// CORS preflight, or a route.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rid := requestID(header(r.Header, "X-Request-Id"))
	// One allocation for the values of X-Request-Id and of an answer's
	// Content-Length (net/http copies the header when it is written).
	vals := &[2]string{rid}
	w.Header()["X-Request-Id"] = vals[0:1:1] // canonical already: no Set
	a := access{rid: rid, hdr: vals}
	l := g.now()
	isWS := l.set.ws.path != "" && r.URL.Path == l.set.ws.path
	if !isWS {
		g.boundBody(w, r, l.set.readBodyTimeout)
	}
	switch {
	case r.URL.Path == "/healthz":
		a.status = g.serveHealth(w, r)
	case r.URL.Path == "/readyz":
		a.status = g.serveReady(w, r)
	case isWS:
		a.status = g.serveWebSocket(w, r, rid)
	case preflight(r):
		a.status = l.set.cors.answerPreflight(w, r)
	default:
		if l.set.cors.enabled() {
			l.set.cors.apply(w.Header(), header(r.Header, "Origin"))
		}
		g.serveRoute(w, r, l, &a)
	}
	g.logAccess(r, l, &a, time.Since(start))
}

// Serve accepts connections on ln and serves them, with the
// configuration's header, read, write and idle timeouts, over TLS when
// [WithTLSFiles] says so, until [Gateway.Shutdown] or [Gateway.Close]
// (then it returns [http.ErrServerClosed]).
func (g *Gateway) Serve(ln net.Listener) error {
	srv := &http.Server{
		Handler:           g,
		ReadHeaderTimeout: g.set.readHeaderTimeout,
		ReadTimeout:       g.set.readTimeout,
		WriteTimeout:      g.set.writeTimeout,
		IdleTimeout:       g.set.idleTimeout,
		MaxHeaderBytes:    g.set.maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
	g.mu.Lock()
	if g.closing.Load() {
		g.mu.Unlock()
		return http.ErrServerClosed
	}
	g.servers = append(g.servers, srv)
	g.mu.Unlock()
	if g.opts.certFile != "" {
		return srv.ServeTLS(ln, g.opts.certFile, g.opts.keyFile)
	}
	return srv.Serve(ln)
}

// Shutdown stops the gateway gracefully: it stops accepting connections,
// lets requests in flight finish, tells each WebSocket client (close
// 1012, service restart) once its requests have been answered, and waits for
// all that up to the grace period ([WithShutdownGrace]) or ctx's end,
// whichever comes first; then it closes what is left. The node is the
// caller's to close.
func (g *Gateway) Shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, g.set.grace)
	defer cancel()
	g.mu.Lock()
	g.closing.Store(true)
	servers := g.servers
	conns := make([]*wsConn, 0, len(g.conns))
	for c := range g.conns {
		conns = append(conns, c)
	}
	g.mu.Unlock()
	for _, c := range conns {
		c.drain()
	}
	var err error
	for _, s := range servers {
		if e := s.Shutdown(ctx); e != nil && err == nil {
			err = e
		}
	}
	done := make(chan struct{})
	go func() { g.connWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		g.closeConns()
		<-done
		if err == nil {
			err = ctx.Err()
		}
	}
	if err != nil {
		for _, s := range servers {
			s.Close()
		}
	}
	g.closeBuilt()
	return err
}

// Close stops the gateway at once: listeners and connections closed,
// WebSocket clients told 1001 (going away: requests in flight may have
// run). It is idempotent.
func (g *Gateway) Close() error {
	g.mu.Lock()
	g.closing.Store(true)
	servers := g.servers
	g.mu.Unlock()
	var err error
	for _, s := range servers {
		if e := s.Close(); e != nil && err == nil {
			err = e
		}
	}
	g.closeConns()
	g.connWG.Wait()
	g.closeBuilt()
	return err
}

// closeBuilt closes what New built, once.
func (g *Gateway) closeBuilt() {
	g.closeOnce.Do(func() {
		g.mu.Lock()
		closers := g.closers
		g.mu.Unlock()
		for _, c := range closers {
			closeQuietly(c)
		}
	})
}

func (g *Gateway) closeConns() {
	g.mu.Lock()
	conns := make([]*wsConn, 0, len(g.conns))
	for c := range g.conns {
		conns = append(conns, c)
	}
	g.mu.Unlock()
	for _, c := range conns {
		c.closeNow(closeGoingAway, "the gateway's shutdown grace ran out")
	}
}

// now returns what requests are served by now.
func (g *Gateway) now() *live { return g.cur.Load() }
