package quic

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/bridge"
	"github.com/wizardmesh/wizard/runtime/internal/connset"
	"github.com/wizardmesh/wizard/runtime/internal/mux"
)

// lingerTimeout bounds how long a connection whose streams have all been
// drained by a shutdown waits for the client to close it: the client
// closes once it has read every answer, while closing from this side
// first could drop answers not yet delivered. A variable for tests.
var lingerTimeout = 3 * time.Second

// streamKey is the context key of the QUIC stream id a call came on.
type streamKey struct{}

// Listen accepts QUIC connections on addr ("host:port", UDP) and serves
// the calls of their streams with s. It needs a server certificate (see
// [WithServerTLS]).
func (t *Transport) Listen(addr string, s runtime.Server) (runtime.Listener, error) {
	tlsConf, err := t.serverTLSConfig()
	if err != nil {
		return nil, err
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("wizard: quic: listen %s: %w", addr, err)
	}
	udp, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("wizard: quic: listen %s: %w", addr, err)
	}
	lim := connset.Resolve(t.maxConns, t.maxConnsPerIP, t.idleTimeout)
	guard := bridge.NewGuard("quic", lim, t.log)
	opts := bridge.WithRoom(t.mux) // for bridge.Handler's requests
	opts.Logger = guard.Log
	ctx, cancel := context.WithCancel(context.Background())
	l := &Listener{
		t:      t,
		udp:    udp,
		h:      bridge.Handler(s),
		opts:   opts,
		guard:  guard,
		lim:    lim,
		budget: bridge.Budget(s),
		ctx:    ctx,
		cancel: cancel,
		kill:   make(chan struct{}),
		linger: lingerTimeout,
		conns:  map[*quicgo.Conn]struct{}{},
		done:   make(chan struct{}),
	}
	l.tr = &quicgo.Transport{Conn: udp, ConnContext: l.startHandshake, VerifySourceAddress: l.verifySource}
	ql, err := l.tr.Listen(tlsConf, t.quicConfig())
	if err != nil {
		cancel()
		guard.Close()
		l.tr.Close()
		udp.Close()
		return nil, fmt.Errorf("wizard: quic: listen %s: %w", addr, err)
	}
	l.ql = ql
	t.checkBuffers(udp)
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// Listener accepts QUIC connections for a node.
type Listener struct {
	t      *Transport
	udp    *net.UDPConn
	tr     *quicgo.Transport
	ql     *quicgo.Listener
	h      mux.Handler
	opts   mux.Options   // the transport's, logging through guard
	guard  *bridge.Guard // the connection limits
	lim    connset.Limits
	budget *mux.Budget     // the node's in-flight limit, shared among connections; nil: none
	ctx    context.Context // ends on Shutdown: each stream sends goaway and drains
	cancel context.CancelFunc
	kill   chan struct{} // closed when connections must close at once
	linger time.Duration

	mu       sync.Mutex
	conns    map[*quicgo.Conn]struct{}
	closed   bool
	killOnce sync.Once

	handshakes atomic.Int64 // QUIC handshakes in progress

	wg       sync.WaitGroup // the accept loop and every connection's goroutine
	done     chan struct{}  // closed when wg is done
	doneOnce sync.Once
	relOnce  sync.Once
}

var _ runtime.Listener = (*Listener)(nil)

// Addr returns the bound UDP address.
func (l *Listener) Addr() string { return l.udp.LocalAddr().String() }

// errHandshakes refuses a QUIC handshake when as many are in progress as
// the listener takes connections.
var errHandshakes = errors.New("too many handshakes in progress (WithMaxConns)")

// handshakeKey is the context key of a connection's [handshake].
type handshakeKey struct{}

// handshake is one QUIC handshake in progress, counted until it is done
// (the connection is accepted) or fails.
type handshake struct {
	l    *Listener
	once sync.Once
}

func (h *handshake) done() { h.once.Do(func() { h.l.handshakes.Add(-1) }) }

// startHandshake is quic-go's ConnContext: it counts the handshakes in
// progress and refuses one beyond the connection limit (quic-go answers
// CONNECTION_REFUSED), so that handshakes cannot hold more than
// connections can. quic-go bounds each handshake in time
// (HandshakeIdleTimeout, 5s by default, and twice that in all).
func (l *Listener) startHandshake(ctx context.Context, info *quicgo.ClientInfo) (context.Context, error) {
	if l.handshakes.Add(1) > int64(l.lim.Max) {
		l.handshakes.Add(-1)
		l.guard.Log.Warn("wizard: quic: handshake refused", "remote", info.RemoteAddr.String(), "reason", errHandshakes.Error())
		return ctx, errHandshakes
	}
	h := &handshake{l: l}
	context.AfterFunc(ctx, h.done) // the handshake failed, or the connection ended
	return context.WithValue(ctx, handshakeKey{}, h), nil
}

// verifySource is quic-go's VerifySourceAddress: when a quarter of the
// handshakes the listener takes are in progress, a client must prove its
// address with a Retry round trip first, so that packets with forged
// source addresses cannot fill the handshake slots.
func (l *Listener) verifySource(net.Addr) bool {
	return l.handshakes.Load() >= int64(max(1, l.lim.Max/4))
}

func (l *Listener) accept() {
	defer l.wg.Done()
	for {
		qc, err := l.ql.Accept(context.Background())
		if err != nil {
			return // closed by Shutdown or Close
		}
		if h, ok := qc.Context().Value(handshakeKey{}).(*handshake); ok {
			h.done()
		}
		// Its own context, so that it can go away alone when idle.
		ctx, cancel := context.WithCancel(l.ctx)
		refuse := func() { qc.CloseWithError(codeRefused, "too many connections") }
		gc, err := l.guard.Admit(qc.RemoteAddr(), refuse, cancel)
		if err != nil {
			cancel()
			refuse()
			continue
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			gc.Remove()
			cancel()
			qc.CloseWithError(codeClosed, "shutting down")
			continue // Accept fails once the queue is empty
		}
		l.conns[qc] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.serve(ctx, qc, gc, cancel)
	}
}

// serve runs mux.Serve on every stream qc's client opens, until the
// connection ends or ctx does (Shutdown, or cancel when idle); then it
// takes qc out of the guard's set.
func (l *Listener) serve(ctx context.Context, qc *quicgo.Conn, gc *connset.Conn, cancel context.CancelFunc) {
	defer l.wg.Done()
	defer gc.Remove()
	defer cancel()
	h := bridge.Tracked(l.h, gc)
	// What de-duplicated answers are bound to: the client's certificate.
	state := func() tls.ConnectionState { return qc.ConnectionState().TLS }
	ctx = bridge.WithTLSIdentity(ctx, state)
	ctx = bridge.WithRemote(ctx, runtime.NewRemote("quic", qc.RemoteAddr().String(), state)) // what handlers see of their callers
	opts := l.opts
	opts.Bounds = mux.NewBounds(opts.MaxInFlight, opts.MaxQueued) // the streams are one connection
	if l.budget != nil {
		opts.Share = l.budget.Share() // the connection's streams are one caller
	}
	var streams sync.WaitGroup
	for {
		s, err := qc.AcceptStream(ctx)
		if err != nil {
			break // the connection ended, or Shutdown
		}
		streams.Go(func() {
			ctx := context.WithValue(ctx, streamKey{}, s.StreamID())
			if err := mux.Serve(ctx, stream{s, qc}, h, opts); err != nil {
				l.guard.Log.Debug("wizard: quic: stream closed", "remote", qc.RemoteAddr().String(), "stream", int64(s.StreamID()), "err", err)
			}
		})
	}
	streams.Wait()
	if opts.Share != nil {
		opts.Share.Close()
	}
	if qc.Context().Err() == nil {
		// Drained after a goaway: the client closes the connection when
		// it has read the last answers.
		t := time.NewTimer(l.linger)
		select {
		case <-qc.Context().Done():
		case <-l.kill:
		case <-t.C:
		}
		t.Stop()
	}
	qc.CloseWithError(codeNoError, "")
	l.mu.Lock()
	delete(l.conns, qc)
	l.mu.Unlock()
}

// Shutdown stops accepting, sends goaway on every stream, waits for their
// calls to finish and for the clients to close their connections, or for
// ctx to be done (then it closes them and returns ctx's error). It
// releases the UDP port in either case.
func (l *Listener) Shutdown(ctx context.Context) error {
	l.stop()
	go func() {
		l.wg.Wait()
		l.finish()
	}()
	var err error
	select {
	case <-l.done:
	case <-ctx.Done():
		l.closeConns()
		<-l.done
		err = ctx.Err()
	}
	l.release()
	return err
}

// Close stops at once: connections close and their calls fail. It is
// idempotent.
func (l *Listener) Close() error {
	l.stop()
	l.closeConns()
	l.wg.Wait()
	l.finish()
	l.release()
	return nil
}

// finish runs once every connection has ended: the guard logs what it
// suppressed, and done closes.
func (l *Listener) finish() {
	l.doneOnce.Do(func() {
		l.guard.Close()
		close(l.done)
	})
}

// stop stops accepting connections and streams, and starts the goaway on
// every stream.
func (l *Listener) stop() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.ql.Close()
	l.cancel()
}

// closeConns closes every connection at once.
func (l *Listener) closeConns() {
	l.killOnce.Do(func() { close(l.kill) })
	l.mu.Lock()
	conns := make([]*quicgo.Conn, 0, len(l.conns))
	for qc := range l.conns {
		conns = append(conns, qc)
	}
	l.mu.Unlock()
	for _, qc := range conns {
		qc.CloseWithError(codeClosed, "listener closed")
	}
}

// release frees the UDP socket.
func (l *Listener) release() {
	l.relOnce.Do(func() {
		l.tr.Close()
		l.udp.Close()
	})
}
