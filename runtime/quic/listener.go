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
	"github.com/wizardmesh/wizard/runtime/internal/listen"
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
	l := &Listener{t: t, udp: udp, conns: listen.NewConns("quic", &t.conf, s), linger: lingerTimeout}
	l.tr = &quicgo.Transport{Conn: udp, ConnContext: l.startHandshake, VerifySourceAddress: l.verifySource}
	ql, err := l.tr.Listen(tlsConf, t.quicConfig())
	if err != nil {
		l.conns.Close()
		l.tr.Close()
		udp.Close()
		return nil, fmt.Errorf("wizard: quic: listen %s: %w", addr, err)
	}
	l.ql = ql
	t.checkBuffers(udp)
	l.conns.Go(l.accept)
	return l, nil
}

// Listener accepts QUIC connections for a node.
type Listener struct {
	t      *Transport
	udp    *net.UDPConn
	tr     *quicgo.Transport
	ql     *quicgo.Listener
	conns  *listen.Conns // the connections, within the limits
	linger time.Duration

	handshakes atomic.Int64 // QUIC handshakes in progress

	relOnce sync.Once
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
	if l.handshakes.Add(1) > int64(l.conns.Limits.Max) {
		l.handshakes.Add(-1)
		l.conns.Guard.Log.Warn("wizard: quic: handshake refused", "remote", info.RemoteAddr.String(), "reason", errHandshakes.Error())
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
	return l.handshakes.Load() >= int64(max(1, l.conns.Limits.Max/4))
}

func (l *Listener) accept() {
	for {
		qc, err := l.ql.Accept(context.Background())
		if err != nil {
			return // closed by Shutdown or Close
		}
		if h, ok := qc.Context().Value(handshakeKey{}).(*handshake); ok {
			h.done()
		}
		refuse := func() { qc.CloseWithError(codeRefused, "too many connections") }
		ctx, c, err := l.conns.Admit(qc.RemoteAddr(), refuse, func() { qc.CloseWithError(codeClosed, "listener closed") })
		switch {
		case errors.Is(err, listen.ErrClosed):
			qc.CloseWithError(codeClosed, "shutting down")
			continue // Accept fails once the queue is empty
		case err != nil:
			refuse()
			continue
		}
		go l.serve(ctx, qc, c)
	}
}

// serve runs mux.Serve on every stream qc's client opens, until the
// connection ends or ctx does (Shutdown, or goaway when idle); then it
// ends c.
func (l *Listener) serve(ctx context.Context, qc *quicgo.Conn, c *listen.Conn) {
	defer c.End()
	h := c.Handler()
	// What de-duplicated answers are bound to: the client's certificate.
	state := func() tls.ConnectionState { return qc.ConnectionState().TLS }
	ctx = bridge.WithTLSIdentity(ctx, state)
	ctx = bridge.WithRemote(ctx, runtime.NewRemote("quic", qc.RemoteAddr().String(), state)) // what handlers see of their callers
	// The connection's streams are one caller of the node's in-flight
	// limit, and one connection of the transport's bounds.
	opts := c.Options()
	opts.Bounds = mux.NewBounds(opts.MaxInFlight, opts.MaxQueued)
	var streams sync.WaitGroup
	for {
		s, err := qc.AcceptStream(ctx)
		if err != nil {
			break // the connection ended, or Shutdown
		}
		streams.Go(func() {
			ctx := context.WithValue(ctx, streamKey{}, s.StreamID())
			if err := mux.Serve(ctx, stream{s, qc}, h, opts); err != nil {
				l.conns.Guard.Log.Debug("wizard: quic: stream closed", "remote", qc.RemoteAddr().String(), "stream", int64(s.StreamID()), "err", err)
			}
		})
	}
	streams.Wait()
	c.Release()
	if qc.Context().Err() == nil {
		// Drained after a goaway: the client closes the connection when
		// it has read the last answers.
		t := time.NewTimer(l.linger)
		select {
		case <-qc.Context().Done():
		case <-l.conns.Killed():
		case <-t.C:
		}
		t.Stop()
	}
	qc.CloseWithError(codeNoError, "")
}

// Shutdown stops accepting, sends goaway on every stream, waits for their
// calls to finish and for the clients to close their connections, or for
// ctx to be done (then it closes them and returns ctx's error). It
// releases the UDP port in either case.
func (l *Listener) Shutdown(ctx context.Context) error {
	l.ql.Close()
	err := l.conns.Shutdown(ctx)
	l.release()
	return err
}

// Close stops at once: connections close and their calls fail. It is
// idempotent.
func (l *Listener) Close() error {
	l.ql.Close()
	l.conns.Close()
	l.release()
	return nil
}

// release frees the UDP socket.
func (l *Listener) release() {
	l.relOnce.Do(func() {
		l.tr.Close()
		l.udp.Close()
	})
}
