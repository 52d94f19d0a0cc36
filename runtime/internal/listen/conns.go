package listen

import (
	"context"
	"errors"
	"net"
	"sync"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/bridge"
	"github.com/wizardmesh/wizard/runtime/internal/connset"
	"github.com/wizardmesh/wizard/runtime/internal/mux"
)

// ErrClosed is [Conns.Admit]'s error for a connection accepted while the
// listener shuts down or closes.
var ErrClosed = errors.New("listener closed")

// Conns keeps a listener's connections: it admits them within the
// limits, gives each its part of the node's in-flight limit, and on
// Shutdown or Close ends them and waits for them. The accept loop runs
// under it too ([Conns.Go]), so that Shutdown waits for it.
type Conns struct {
	// Guard holds the connection limits and the rate-limited logger.
	Guard *bridge.Guard
	// Limits are the connection limits, the defaults resolved.
	Limits connset.Limits

	h      mux.Handler
	opts   mux.Options     // the transport's, logging through Guard
	budget *mux.Budget     // the node's in-flight limit, shared among connections; nil: none
	ctx    context.Context // ends on Shutdown: each connection sends goaway and drains
	cancel context.CancelFunc
	kill   chan struct{} // closed when the connections are closed at once

	mu     sync.Mutex
	conns  map[*Conn]struct{}
	closed bool
	wg     sync.WaitGroup // the accept loop and every connection
	done   chan struct{}  // closed once wg is done and the guard closed
	once   sync.Once
	killed sync.Once
}

// NewConns returns the connections of a listener of transport name
// ("tcp") configured by c, serving s.
func NewConns(name string, c *Config, s runtime.Server) *Conns {
	lim := c.Limits()
	guard := bridge.NewGuard(name, lim, c.Mux.Logger)
	opts := bridge.WithRoom(c.Mux) // for bridge.Handler's requests
	opts.Logger = guard.Log
	opts.ServeStream = bridge.StreamHandler(s)
	ctx, cancel := context.WithCancel(context.Background())
	return &Conns{
		Guard:  guard,
		Limits: lim,
		h:      bridge.Handler(s),
		opts:   opts,
		budget: bridge.Budget(s),
		ctx:    ctx,
		cancel: cancel,
		kill:   make(chan struct{}),
		conns:  map[*Conn]struct{}{},
		done:   make(chan struct{}),
	}
}

// Go runs f, the accept loop, in a goroutine that Shutdown and Close wait
// for.
func (cs *Conns) Go(f func()) { cs.wg.Go(f) }

// Conn is an admitted connection. Its server ends it with [Conn.End].
type Conn struct {
	cs       *Conns
	gc       *connset.Conn
	cancel   context.CancelFunc
	closeNow func()
	share    *mux.Share // its part of the in-flight limit; nil: none
}

// Admit admits a connection from remote within the limits, while the
// listener is open. It returns the connection's context, which ends on
// Shutdown and when the connection has been idle too long (then the
// server sends goaway). refuse closes the connection when the limits
// make room for another, closeNow when the listener closes at once. On
// an error the caller closes the connection: ErrClosed when the listener
// is shutting down, else the limits refused it (the guard logged why).
func (cs *Conns) Admit(remote net.Addr, refuse, closeNow func()) (context.Context, *Conn, error) {
	ctx, cancel := context.WithCancel(cs.ctx) // its own, so that it can go away alone when idle
	gc, err := cs.Guard.Admit(remote, refuse, cancel)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	c := &Conn{cs: cs, gc: gc, cancel: cancel, closeNow: closeNow}
	cs.mu.Lock()
	if cs.closed {
		cs.mu.Unlock()
		gc.Remove()
		cancel()
		return nil, nil, ErrClosed
	}
	cs.conns[c] = struct{}{}
	cs.wg.Add(1)
	cs.mu.Unlock()
	if cs.budget != nil {
		c.share = cs.budget.Share() // each connection is a caller of its own
	}
	return ctx, c, nil
}

// Handler returns the listener's handler, counting c's requests in
// flight so that the limits know whether c is idle.
func (c *Conn) Handler() mux.Handler { return bridge.Tracked(c.cs.h, c.gc) }

// Options returns the options c is served with: the transport's, logging
// through the guard, with c's part of the node's in-flight limit.
func (c *Conn) Options() mux.Options {
	opts := c.cs.opts
	opts.Share = c.share
	if h := opts.ServeStream; h != nil {
		// An open stream keeps its connection from being idle.
		gc := c.gc
		opts.ServeStream = func(ctx context.Context, st *mux.ServerStream) error {
			gc.Begin()
			defer gc.End()
			return h(ctx, st)
		}
	}
	return opts
}

// Release gives c's part of the node's in-flight limit back to the
// others, once c serves no more calls; [Conn.End] does too.
func (c *Conn) Release() {
	if c.share != nil {
		c.share.Close()
	}
}

// End takes c, whose serving is over, out of the limits and of the
// listener.
func (c *Conn) End() {
	c.Release()
	c.cancel()
	c.gc.Remove()
	c.cs.mu.Lock()
	delete(c.cs.conns, c)
	c.cs.mu.Unlock()
	c.cs.wg.Done()
}

// Stopped is closed when Shutdown or Close begins.
func (cs *Conns) Stopped() <-chan struct{} { return cs.ctx.Done() }

// Killed is closed when the listener closes its connections at once.
func (cs *Conns) Killed() <-chan struct{} { return cs.kill }

// Shutdown admits no more connections, ends their context so that each
// sends goaway and drains, and waits until every connection has ended
// and the accept loop returned, or until ctx is done: then it closes the
// connections at once, waits for them, and returns ctx's error. The
// transport stops accepting first.
func (cs *Conns) Shutdown(ctx context.Context) error {
	cs.stop()
	go func() {
		cs.wg.Wait()
		cs.finish()
	}()
	select {
	case <-cs.done:
		return nil
	case <-ctx.Done():
		cs.closeAll()
		<-cs.done
		return ctx.Err()
	}
}

// Close admits no more connections, closes them at once and waits for
// them and for the accept loop. The transport stops accepting first.
func (cs *Conns) Close() {
	cs.stop()
	cs.closeAll()
	cs.wg.Wait()
	cs.finish()
}

func (cs *Conns) stop() {
	cs.mu.Lock()
	cs.closed = true
	cs.mu.Unlock()
	cs.cancel()
}

// closeAll closes every connection at once.
func (cs *Conns) closeAll() {
	cs.killed.Do(func() { close(cs.kill) })
	cs.mu.Lock()
	closers := make([]func(), 0, len(cs.conns))
	for c := range cs.conns {
		closers = append(closers, c.closeNow)
	}
	cs.mu.Unlock()
	for _, f := range closers {
		f()
	}
}

// finish runs once every connection has ended: the guard logs what it
// suppressed, and done closes.
func (cs *Conns) finish() {
	cs.once.Do(func() {
		cs.Guard.Close()
		close(cs.done)
	})
}
