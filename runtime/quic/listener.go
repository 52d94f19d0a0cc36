package quic

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	quicgo "github.com/quic-go/quic-go"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/bridge"
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
	tr := &quicgo.Transport{Conn: udp}
	ql, err := tr.Listen(tlsConf, t.quicConfig())
	if err != nil {
		tr.Close()
		udp.Close()
		return nil, fmt.Errorf("wizard: quic: listen %s: %w", addr, err)
	}
	t.checkBuffers(udp)
	ctx, cancel := context.WithCancel(context.Background())
	l := &Listener{
		t:      t,
		udp:    udp,
		tr:     tr,
		ql:     ql,
		h:      bridge.Handler(s),
		budget: bridge.Budget(s),
		ctx:    ctx,
		cancel: cancel,
		kill:   make(chan struct{}),
		linger: lingerTimeout,
		conns:  map[*quicgo.Conn]struct{}{},
		done:   make(chan struct{}),
	}
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
	budget *mux.Budget     // the node's in-flight limit, shared among connections; nil: none
	ctx    context.Context // ends on Shutdown: each stream sends goaway and drains
	cancel context.CancelFunc
	kill   chan struct{} // closed when connections must close at once
	linger time.Duration

	mu       sync.Mutex
	conns    map[*quicgo.Conn]struct{}
	closed   bool
	killOnce sync.Once
	wg       sync.WaitGroup // the accept loop and every connection's goroutine
	done     chan struct{}  // closed when wg is done
	doneOnce sync.Once
	relOnce  sync.Once
}

var _ runtime.Listener = (*Listener)(nil)

// Addr returns the bound UDP address.
func (l *Listener) Addr() string { return l.udp.LocalAddr().String() }

func (l *Listener) accept() {
	defer l.wg.Done()
	for {
		qc, err := l.ql.Accept(context.Background())
		if err != nil {
			return // closed by Shutdown or Close
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			qc.CloseWithError(codeError, "shutting down")
			continue // Accept fails once the queue is empty
		}
		l.conns[qc] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.serve(qc)
	}
}

// serve runs mux.Serve on every stream qc's client opens, until the
// connection ends or the listener shuts down.
func (l *Listener) serve(qc *quicgo.Conn) {
	defer l.wg.Done()
	opts := l.t.mux
	if l.budget != nil {
		opts.Share = l.budget.Share() // the connection's streams are one caller
	}
	var streams sync.WaitGroup
	for {
		s, err := qc.AcceptStream(l.ctx)
		if err != nil {
			break // the connection ended, or Shutdown
		}
		streams.Go(func() {
			ctx := context.WithValue(l.ctx, streamKey{}, s.StreamID())
			if err := mux.Serve(ctx, stream{s, qc}, l.h, opts); err != nil {
				l.t.log.Debug("wizard: quic: stream closed", "remote", qc.RemoteAddr().String(), "stream", int64(s.StreamID()), "err", err)
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
		l.doneOnce.Do(func() { close(l.done) })
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
	l.doneOnce.Do(func() { close(l.done) })
	l.release()
	return nil
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
		qc.CloseWithError(codeError, "listener closed")
	}
}

// release frees the UDP socket.
func (l *Listener) release() {
	l.relOnce.Do(func() {
		l.tr.Close()
		l.udp.Close()
	})
}
