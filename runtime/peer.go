package runtime

import (
	"context"
	crand "crypto/rand"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wizardmesh/wizard/runtime/pattern"
)

// peer is one remote node this node calls.
type peer struct {
	addr     string
	id       string // guarded by remote.mu
	instance string // guarded by remote.mu
	digest   string // guarded by remote.mu: the digest discovery announced ("" for none)
	loaded   string // guarded by remote.mu: the digest of the catalog routed now
	named    bool   // discovery named it (by id or instance): it may be given up
	// claims are whom discovery announced at addr, latest last: the
	// peer is routed only while its connection answers as one of them.
	claims  []claim       // guarded by remote.mu
	misled  misidentified // guarded by remote.mu: the mismatch last logged
	suspect atomic.Bool
	down    atomic.Bool // reported down: a last resort over its connection, kept for downGrace
	downT   *time.Timer // forgets the peer when downGrace passes; guarded by remote.mu
	// token goes with every call to the peer that may be sent again: the
	// peer gives a stored answer only to a call with the same token (and
	// the same transport identity), so another peer that learns this
	// node's id and call ids from the calls it gets cannot take or plant
	// answers here. Random per peer and per run.
	token    string
	node     *Node
	target   Target // what balancers hold; target.p is this peer
	breaker  atomic.Pointer[breakerBox]
	load     load // its answers, for the default balancer
	conn     atomic.Pointer[connBox]
	patterns []pattern.Pattern // routed now; guarded by Node.routeMu
	types    catalogTypes      // the message types of its typed patterns; guarded by Node.routeMu
	ctx      context.Context
	cancel   context.CancelFunc
	refetch  chan struct{}
	revive   chan struct{} // discovery reported something new of it; capacity 1
	done     chan struct{}

	dialErr atomic.Pointer[string] // why the last dial (or catalog pull) failed; nil once connected
	// refusedAt is when a dial last found no one listening at addr
	// (connection refused), in Unix nanoseconds: the run of the peer
	// that listened there is gone, so a lost call waits for it no more.
	refusedAt atomic.Int64
}

// connBox is one connection to a peer and the instance (run) of the peer
// it reaches, known once the peer's catalog is loaded on it.
type connBox struct {
	c    Conn
	inst atomic.Pointer[string]
}

// instance returns the peer's instance on b, or "" while it is not known.
func (b *connBox) instance() string {
	if s := b.inst.Load(); s != nil {
		return *s
	}
	return ""
}

// downGrace is how long a node keeps the connection to a peer reported
// down, in case it comes back.
const downGrace = 5 * time.Second

// forgetPeer ends a peer that is still down.
func (n *Node) forgetPeer(p *peer) {
	r := n.remote
	r.mu.Lock()
	gone := r.peers[p.addr] == p && p.down.Load()
	if gone {
		delete(r.peers, p.addr)
	}
	r.mu.Unlock()
	if gone {
		p.cancel()
	}
}

func (p *peer) signalRefetch() { signal(p.refetch) }

// signal sends on a channel of capacity 1 unless a send is pending.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default: // one is pending already
	}
}

// Dialling a peer that does not answer (its dial or its catalog pull
// fails): the wait between attempts starts at minDialBackoff and doubles,
// with full jitter, up to maxDialBackoff for the first unansweredDials
// attempts after the peer answered (a dropped connection comes back
// quickly), then up to maxAnsweredBackoff (a peer that answered before
// is back within that of its return, after a partition or a restart of
// any length), and up to maxUnansweredBackoff for a peer that never
// answered. A peer that discovery named
// (by id or instance) and that never answered is given up after
// unansweredDials attempts: it is dialled again only when discovery
// reports something new of it (another run, another digest), and then
// after the backoff it had reached. A static peer is never given up.
const (
	minDialBackoff       = 20 * time.Millisecond
	maxDialBackoff       = 2 * time.Second
	maxAnsweredBackoff   = 10 * time.Second
	maxUnansweredBackoff = time.Minute
	unansweredDials      = 16
	defaultMaxDials      = 16 // dials under way at once; WithMaxDials
)

// quietRefreshes is how many catalog refreshes apart a node looks at a
// peer whose digests discovery announces, its last pull answered (see
// watchPeer).
const quietRefreshes = 15

// minDialTimeout bounds a dial (connection and handshakes) from below: as
// long as a listener gives a caller for its handshake (the transports'
// default, mux.DefaultHandshakeTimeout), so that a dial to a loaded peer
// is not given up while the peer is still working on it. A dial given up
// sooner throws that work away and adds another: when every member dials
// every other at once (a mesh forming, a mass restart), that is how a
// slow mesh stops forming at all. (gRPC's least connect timeout is 20 s.)
const minDialTimeout = 10 * time.Second

// maxPulls bounds the catalog pulls a node runs at once; further pulls
// wait for a slot, in the order they came, and their timeout starts when
// they get one. A mesh-wide change (a deploy, every member announcing a
// new catalog) has each of N members pull N−1 catalogs at the same time:
// unbounded, the N² pulls share the cores at once, every one of them
// late, and a pull past its deadline is pulled again, its connection
// pinged, closed and dialled again — work added to a machine already
// behind, until the mesh stops settling.
// Queued, each member has maxPulls in flight and every pull finishes in
// its slot's time; a peer serves about maxPulls pulls at once on average.
const maxPulls = 8

// pullTimeout bounds a catalog pull: the default timeout, at least
// minDialTimeout, as a dial's (the pull is how a peer is connected, and a
// pull given up on a loaded peer is work thrown away, and pulled again).
func (r *remote) pullTimeout() time.Duration { return max(r.defaultTimeout, minDialTimeout) }

// runPeer keeps a connection to p and p's patterns in routing: dial with
// backoff, fetch the catalog, refresh it, and start over when the
// connection drops.
func (n *Node) runPeer(p *peer) {
	defer close(p.done)
	defer n.dropBreaker(p)
	defer n.setCatalog(p, nil)
	timer := time.NewTimer(0)
	defer timer.Stop()
	wait := func(d time.Duration) bool {
		timer.Reset(d)
		select {
		case <-timer.C:
			return true
		case <-p.ctx.Done():
			return false
		}
	}
	backoff, failures, answered := minDialBackoff, 0, false
	for p.ctx.Err() == nil {
		select {
		case <-p.revive: // what discovery reported until now, this attempt sees
		default:
		}
		conn, pullErr, err := n.connect(p)
		if e := (*misidentified)(nil); errors.As(err, &e) {
			if !n.parkMisidentified(p, e) {
				return
			}
			continue
		}
		if err != nil {
			if p.ctx.Err() != nil {
				return
			}
			failures++
			msg := err.Error()
			p.dialErr.Store(&msg)
			if errors.Is(err, syscall.ECONNREFUSED) {
				p.refusedAt.Store(time.Now().UnixNano())
			}
			if !answered && p.named && failures >= unansweredDials {
				n.log.Warn("wizard: peer never answered; dialled again when discovery reports a change", "addr", p.addr, "attempts", failures, "err", err)
				select {
				case <-p.revive:
				case <-p.ctx.Done():
					return
				}
			}
			if failures == 1 {
				// Once as it starts failing, then at Debug while it keeps
				// failing: a peer down for an hour is one warning.
				n.log.Warn("wizard: peer unreachable; dialling it again with backoff", "addr", p.addr, "err", err)
			} else {
				n.log.Debug("wizard: peer still unreachable", "addr", p.addr, "err", err, "attempts", failures, "retry", backoff)
			}
			// Full jitter keeps a fleet from reconnecting in step.
			if !wait(backoff/2 + rand.N(backoff/2+1)) {
				return
			}
			limit := maxUnansweredBackoff
			switch {
			case answered && failures < unansweredDials:
				limit = maxDialBackoff
			case answered:
				limit = maxAnsweredBackoff
			}
			backoff = min(2*backoff, limit)
			continue
		}
		answered, failures, backoff = true, 0, minDialBackoff
		p.dialErr.Store(nil)
		p.load.reset()
		n.log.Debug("wizard: peer connected", "addr", p.addr)
		if pullErr != nil {
			n.log.Warn("wizard: catalog pull failed; pulled again at the next refresh", "addr", p.addr, "err", pullErr, "retry", n.remote.refresh)
		}
		n.watchPeer(p, conn, pullErr != nil)
		p.conn.Store(nil)
		n.setCatalog(p, nil)
		conn.Close()
	}
}

// connect dials p, within the node's bound on dials under way and its
// default timeout (at least minDialTimeout), and loads p's catalog on the new connection. A pull
// that timed out, or that p refused as overloaded, on a connection still
// open is pullErr, and conn is kept: p is slow or busy, not gone
// (keep-alive closes the connection to a host gone silent), and a new
// dial would cost p more than the pull again at the next refresh; p is
// not routed meanwhile. Any other failure closes the connection: err.
func (n *Node) connect(p *peer) (conn Conn, pullErr, err error) {
	r := n.remote
	select {
	case r.dials <- struct{}{}:
	case <-p.ctx.Done():
		return nil, nil, p.ctx.Err()
	}
	ctx, cancel := context.WithTimeout(p.ctx, max(r.defaultTimeout, minDialTimeout)) // as pullTimeout
	conn, err = r.transport.Dial(ctx, p.addr)
	cancel()
	<-r.dials
	if err != nil {
		return nil, nil, err
	}
	// Connected before routed: a caller that sees p's patterns finds its
	// connection.
	box := &connBox{c: conn}
	p.conn.Store(box)
	if err := n.loadCatalog(p, box); err != nil {
		if p.ctx.Err() == nil && pullAgain(err, conn) {
			return conn, err, nil
		}
		p.conn.Store(nil)
		conn.Close()
		return nil, nil, err
	}
	return conn, nil, nil
}

// pullAgain says whether a catalog pull that failed with err is pulled
// again on conn: it timed out, or the peer refused it as overloaded
// (unavailable, resource exhausted), and conn is still open.
func pullAgain(err error, conn Conn) bool {
	if closed(conn) {
		return false
	}
	var e *Error
	return errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &e) && (e.Code == CodeDeadlineExceeded || e.Code == CodeUnavailable || e.Code == CodeResourceExhausted)
}

// watchPeer refreshes p's catalog until its connection drops or p stops.
// A peer discovery announces digests for is pulled when its digest
// changes, and again at every refresh tick after a pull that failed (it
// timed out on a loaded host, say) until one succeeds: discovery announces
// the change only once. failed says that the pull on connecting failed.
//
// While discovery announces p's digests and the last pull succeeded, the
// timer looks only every quietRefreshes refreshes (discovery signals
// every change, a digest dropped included): a node holds a watch per
// peer, N−1 of them, which would otherwise each wake every refresh.
func (n *Node) watchPeer(p *peer, conn Conn, failed bool) {
	tick := time.NewTicker(n.remote.refresh)
	defer tick.Stop()
	quiet := false // the ticker runs at quietRefreshes × refresh
	pace := func() {
		n.remote.mu.Lock()
		q := p.digest != "" && !failed
		n.remote.mu.Unlock()
		switch {
		case q && !quiet:
			tick.Reset(quietRefreshes * n.remote.refresh)
		case !q && quiet:
			tick.Reset(n.remote.refresh)
		}
		quiet = q
	}
	pace()
	for {
		select {
		case <-conn.Done():
			switch {
			case p.ctx.Err() != nil || n.closed.Load():
			case p.down.Load(): // it left, as discovery said
				n.log.Debug("wizard: connection to peer lost", "addr", p.addr)
			default:
				if rc, ok := conn.(reasonConn); ok && rc.Reason() != nil {
					n.log.Warn("wizard: connection to peer lost", "addr", p.addr, "err", rc.Reason())
				} else {
					n.log.Warn("wizard: connection to peer lost", "addr", p.addr)
				}
			}
			return
		case <-p.ctx.Done():
			return
		case <-tick.C:
			n.remote.mu.Lock()
			gossiped := p.digest != ""
			n.remote.mu.Unlock()
			if gossiped && !failed {
				pace()
				continue // discovery tells when its patterns change
			}
		case <-p.refetch:
		}
		err := n.loadCatalog(p, p.conn.Load())
		failed = err != nil
		pace()
		switch {
		case errors.Is(err, errMisidentified):
			return // runPeer drops the connection and its routes
		case p.ctx.Err() != nil:
			return // p stopped (it left, or the node is closing): no warning
		case err != nil && closed(conn):
			continue // the loop says the connection was lost
		case err != nil:
			n.log.Warn("wizard: catalog refresh failed; pulled again at the next refresh", "addr", p.addr, "err", err, "retry", n.remote.refresh)
		}
	}
}

// closed reports whether conn has ended.
func closed(conn Conn) bool {
	select {
	case <-conn.Done():
		return true
	default:
		return false
	}
}

// stopPeers stops the connections to peers (discovery has stopped).
func (n *Node) stopPeers() error {
	r := n.remote
	var err error
	r.mu.Lock()
	peers := r.peers
	r.peers = map[string]*peer{}
	for _, p := range peers {
		if p.downT != nil {
			p.downT.Stop()
		}
	}
	r.mu.Unlock()
	for _, p := range peers {
		p.cancel()
	}
	for _, p := range peers {
		<-p.done
	}
	return err
}

// tokenSize is the size of a peer's token.
const tokenSize = 16

// newToken returns a random peer token.
func newToken() string {
	var b [tokenSize]byte
	_, _ = crand.Read(b[:])
	return string(b[:])
}
