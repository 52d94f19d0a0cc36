package quic

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"

	quicgo "github.com/quic-go/quic-go"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/bridge"
	"github.com/wizardmesh/wizard/runtime/internal/mux"
	"github.com/wizardmesh/wizard/runtime/internal/streamconn"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// Conn is a client connection to one node: one QUIC connection carrying a
// few long-lived streams, each multiplexing many calls.
type Conn struct {
	qc      *quicgo.Conn
	tr      *quicgo.Transport
	udp     *net.UDPConn
	clients []*mux.Client  // one per stream
	busy    []atomic.Int64 // calls in flight on each stream
	fill    int64          // calls a stream takes before the next does; 0: in turn
	next    atomic.Uint32  // round robin over clients, when fill is 0
	live    atomic.Int32   // clients not yet ended
	wg      sync.WaitGroup
	once    sync.Once
	where   string // "wizard: quic: <addr>", to start its errors
}

var (
	_ runtime.GoAwayConn          = (*Conn)(nil)
	_ runtime.PeerCertificateConn = (*Conn)(nil)
)

// PeerCertificate returns the certificate the server presented and
// [WithClientTLS]'s configuration verified, or nil when verification was
// skipped ([WithInsecureSelfSigned]).
func (c *Conn) PeerCertificate() *x509.Certificate {
	return bridge.VerifiedLeaf(c.qc.ConnectionState().TLS)
}

// GoAway reports whether the server said goaway on any of c's streams,
// or closed the connection as its listener closed.
func (c *Conn) GoAway() bool {
	for _, cl := range c.clients {
		if cl.GoAway() {
			return true
		}
	}
	var ae *quicgo.ApplicationError
	return errors.As(context.Cause(c.qc.Context()), &ae) && ae.Remote && ae.ErrorCode == codeClosed
}

func newConn(qc *quicgo.Conn, tr *quicgo.Transport, udp *net.UDPConn, clients []*mux.Client, fill int64, where string) *Conn {
	c := &Conn{qc: qc, tr: tr, udp: udp, clients: clients, busy: make([]atomic.Int64, len(clients)), fill: fill, where: where}
	c.live.Store(int32(len(clients)))
	for _, cl := range clients {
		c.wg.Add(1)
		go c.watch(cl)
	}
	return c
}

// watch closes the QUIC connection when cl ends abnormally, or when it is
// the last stream to end. A stream the server ended in order (a goaway,
// or a clean end of stream: a server shutting down before it finished
// setting a stream up closes it without a goaway) leaves the others to
// finish their calls.
func (c *Conn) watch(cl *mux.Client) {
	defer c.wg.Done()
	<-cl.Done()
	last := c.live.Add(-1) == 0
	switch {
	case !cl.GoAway() && !errors.Is(cl.Err(), io.EOF):
		c.qc.CloseWithError(codeError, "stream failed")
	case last:
		c.qc.CloseWithError(codeNoError, "")
	}
}

// Call sends m over a stream and waits for the reply: the first stream
// with fewer calls in flight than the fill bound (see [WithStreamFill]),
// else the one with the fewest; or, with the bound off, the next stream
// in turn. Streams that ended or said goaway are passed over.
// A goaway on any stream means the server's listener is shutting down,
// which sends goaway on every stream, one after another: the call is
// refused at once as not sent (the stream that said goaway refuses it),
// rather than slipping onto a stream whose goaway is still on its way.
// An error of the connection reads "wizard: quic: <addr>: call not sent:
// <why>" (and matches [runtime.ErrNotSent]) or "wizard: quic: <addr>:
// connection lost after the call was sent: <why>".
func (c *Conn) Call(ctx context.Context, m *runtime.Message) (*runtime.Message, error) {
	for _, cl := range c.clients {
		if cl.GoAway() {
			return bridge.Call(ctx, cl, m, c.where)
		}
	}
	i := c.pick()
	c.busy[i].Add(1)
	defer c.busy[i].Add(-1)
	return bridge.Call(ctx, c.clients[i], m, c.where)
}

// OpenStream opens a wizard stream on one of the connection's QUIC
// streams, in turn, multiplexed with the calls it carries; the node calls
// it to open a stream (runtime.Node.OpenStream) to the peer.
func (c *Conn) OpenStream(ctx context.Context, open *wire.Frame) (streamconn.Client, error) {
	return bridge.OpenStream(ctx, c.clients[c.inTurn()], open, c.where)
}

// pick returns the index of the stream the next call goes to. When no
// stream is usable it returns one anyway, whose call fails as not sent.
func (c *Conn) pick() int {
	if c.fill == 0 {
		return c.inTurn()
	}
	best, least := 0, int64(-1)
	for i, cl := range c.clients {
		if !usable(cl) {
			continue
		}
		n := c.busy[i].Load()
		if n < c.fill {
			return i
		}
		if least < 0 || n < least {
			best, least = i, n
		}
	}
	return best
}

// inTurn returns the index of the next usable stream in turn, or of the
// next stream when none is usable.
func (c *Conn) inTurn() int {
	n := uint32(len(c.clients))
	i := c.next.Add(1)
	for k := range n {
		if j := (i + k) % n; usable(c.clients[j]) {
			return int(j)
		}
	}
	return int(i % n)
}

// usable reports whether cl takes new calls.
func usable(cl *mux.Client) bool { return !cl.GoAway() && cl.Err() == nil }

// Done is closed when the QUIC connection is gone: the peer closed it or
// went silent, a stream failed, or every stream was ended by the server
// (after a goaway, when it shuts down).
func (c *Conn) Done() <-chan struct{} { return c.qc.Context().Done() }

// Close closes the connection, and its UDP socket; calls in flight fail.
// It is idempotent and returns nil.
func (c *Conn) Close() error {
	c.once.Do(func() {
		for _, cl := range c.clients {
			cl.Close()
		}
		c.qc.CloseWithError(codeNoError, "")
		c.wg.Wait()
		c.tr.Close()
		c.udp.Close()
	})
	return nil
}
