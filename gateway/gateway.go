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

	"github.com/wizardmesh/wizard/runtime"
)

// Gateway serves HTTP and WebSocket on one [http.Handler] and calls into
// the mesh through its node. Make one with [New]; serve it with
// [Gateway.Serve] or mount it as a handler; stop it with
// [Gateway.Shutdown].
type Gateway struct {
	node   *runtime.Node
	routes atomic.Pointer[tableBox]
	auth   verifier
	set    settings
	log    *slog.Logger
	opts   options
	ipLim  *limiter
	subLim *limiter

	closers   []io.Closer // what New built (the verifier), closed by Close
	closeOnce sync.Once

	closing atomic.Bool
	mu      sync.Mutex
	servers []*http.Server
	conns   map[*wsConn]struct{}
	connWG  sync.WaitGroup
}

var _ http.Handler = (*Gateway)(nil)

type tableBox struct{ t table }

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
	g := &Gateway{
		node: node, auth: o.verifier, set: set, log: o.log, opts: o,
		ipLim:  newLimiter(set.perIP, 0),
		subLim: newLimiter(set.perSubject, 0),
		conns:  make(map[*wsConn]struct{}),
	}
	g.routes.Store(&tableBox{t})
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
	rid := requestID(r.Header.Get("X-Request-Id"))
	w.Header()["X-Request-Id"] = []string{rid} // canonical already: no Set
	a := access{rid: rid}
	isWS := g.set.ws.path != "" && r.URL.Path == g.set.ws.path
	if !isWS {
		g.boundBody(w, r)
	}
	switch {
	case r.URL.Path == "/healthz":
		a.status = g.serveHealth(w, r)
	case r.URL.Path == "/readyz":
		a.status = g.serveReady(w, r)
	case isWS:
		a.status = g.serveWebSocket(w, r, rid)
	case preflight(r):
		a.status = g.set.cors.answerPreflight(w, r)
	default:
		g.set.cors.apply(w.Header(), r.Header.Get("Origin"))
		g.serveRoute(w, r, &a)
	}
	g.logAccess(r, &a, time.Since(start))
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
// 1001, going away) once its requests have been answered, and waits for
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
// WebSocket clients told 1001. It is idempotent.
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
		for _, c := range g.closers {
			if c != nil {
				c.Close()
			}
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
		c.closeNow(closeGoingAway, "the gateway is shutting down")
	}
}

// table returns the current route table.
func (g *Gateway) table() table { return g.routes.Load().t }

// swapTable replaces the route table; requests already matched keep the
// old one.
func (g *Gateway) swapTable(t table) { g.routes.Store(&tableBox{t}) }
