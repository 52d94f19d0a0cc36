package runtime

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// CatalogPattern is the built-in system pattern through which nodes fetch
// each other's pattern catalogs. Every node with a transport serves it.
const CatalogPattern = "cmd:catalog,sys:wizard"

// Catalog is what a node answers on [CatalogPattern]: its id, the digest
// of its pattern set (see [Peer].Digest) and the patterns of its local
// handlers.
type Catalog struct {
	ID       string   `json:"id"`
	Digest   string   `json:"digest,omitempty"`
	Instance string   `json:"instance,omitempty"`
	Patterns []string `json:"patterns"`
}

// Peer describes a node as discovery reports it.
type Peer struct {
	// ID is the node's id, if known.
	ID string
	// Instance identifies one run of the node, if known: a node restarted
	// under the same id (and maybe the same address) has a new instance. A
	// PeerDown for an instance other than the one known at that address is
	// ignored, so a late death notice never removes the node's next run.
	Instance string
	// Addr is the address its transport listens on.
	Addr string
	// Transport names the transport Addr belongs to ("tcp", "quic"); empty
	// means this node's own. A node ignores peers on another transport.
	Transport string
	// Digest identifies the peer's pattern set: a short hash of its
	// patterns in canonical form, at most 32 bytes. A node fetches a peer's
	// catalog when it sees a digest it has not seen before; nodes with the
	// same digest share one cached catalog. Empty means unknown: the node
	// fetches the catalog and refreshes it periodically.
	Digest string
	// Suspect says discovery suspects the peer is down. A suspect peer gets
	// no new calls while another target serves the pattern.
	Suspect bool
}

// Discovery finds other nodes. [StaticPeers] is the simplest; runtime/swim
// gossips. A node calls Start once, when it is created, and Close when it
// shuts down.
type Discovery interface {
	Start(host DiscoveryHost) error
	Close() error
}

// DiscoveryHost is the node's side of [Discovery]: discovery reports peers
// that appear or change and peers that leave. Its methods are safe for
// concurrent use and do not block on the network.
type DiscoveryHost interface {
	// Self describes this node: id, listen address, transport and the
	// digest of its current pattern set.
	Self() Peer
	// PeerUp reports a peer that appeared or changed (address, digest,
	// suspicion): the node connects to it and fetches its catalog when the
	// digest is new to it.
	PeerUp(p Peer)
	// PeerDown reports a peer that left or died: its patterns leave routing
	// at once. A PeerDown whose Instance differs from the one the node knows
	// at that address (a restarted node reusing it) is ignored.
	PeerDown(p Peer)
}

// SelfAnnouncer is implemented by a [Discovery] that announces this node's
// pattern set to others. The node calls SelfChanged after its local
// patterns change; the discovery then reads [DiscoveryHost.Self] again and
// re-announces. SelfChanged must not block.
type SelfAnnouncer interface {
	SelfChanged()
}

type staticPeers []string

// StaticPeers is discovery without gossip: the node connects to each
// address, fetches its catalog, keeps it fresh, and reconnects with backoff
// when a connection drops.
func StaticPeers(addrs ...string) Discovery { return staticPeers(slices.Clone(addrs)) }

func (s staticPeers) Start(h DiscoveryHost) error {
	for _, a := range s {
		h.PeerUp(Peer{Addr: a})
	}
	return nil
}

func (staticPeers) Close() error { return nil }

// remote is the node's remote side: its listener and the peers it calls.
type remote struct {
	transport      Transport
	listenAddr     string
	listener       Listener
	discovery      Discovery
	defaultTimeout time.Duration
	refresh        time.Duration
	newBalancer    func(Pattern) Balancer
	newBreaker     func(*Target) Breaker
	budget         *retryBudget

	mu       sync.Mutex
	peers    map[string]*peer     // by address
	catalogs map[string][]Pattern // fetched pattern sets by digest

	self selfDigest
}

// maxCachedCatalogs bounds the catalogs a node keeps by digest; past it the
// cache starts over (the catalogs in routing stay routed).
const maxCachedCatalogs = 4096

// peer is one remote node this node calls.
type peer struct {
	addr     string
	id       string // guarded by remote.mu
	instance string // guarded by remote.mu
	digest   string // guarded by remote.mu: the digest discovery announced ("" for none)
	loaded   string // guarded by remote.mu: the digest of the catalog routed now
	suspect  atomic.Bool
	down     atomic.Bool // reported down: out of routing, its connection kept for downGrace
	downT    *time.Timer // forgets the peer when downGrace passes; guarded by remote.mu
	force    atomic.Bool // the next catalog load bypasses the cache
	node     *Node
	target   Target // what balancers hold; target.p is this peer
	breaker  atomic.Pointer[breakerBox]
	conn     atomic.Pointer[connBox]
	patterns []Pattern // routed now; guarded by Node.routeMu
	ctx      context.Context
	cancel   context.CancelFunc
	refetch  chan struct{}
	done     chan struct{}
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

// Addr returns the address the node's transport listens on, or "" when it
// does not listen.
func (n *Node) Addr() string {
	if n.remote == nil || n.remote.listener == nil {
		return ""
	}
	return n.remote.listener.Addr()
}

// startRemote starts the listener and discovery.
func (n *Node) startRemote() error {
	r := n.remote
	if r.listenAddr != "" {
		l, err := r.transport.Listen(r.listenAddr, n)
		if err != nil {
			return fmt.Errorf("wizard: listen on %s: %w", r.listenAddr, err)
		}
		r.listener = l
	}
	if r.discovery != nil {
		if err := r.discovery.Start(nodeHost{n}); err != nil {
			if r.listener != nil {
				r.listener.Close()
			}
			return fmt.Errorf("wizard: start discovery: %w", err)
		}
	}
	return nil
}

// stopListener stops accepting remote calls: goaway, then drain.
func (n *Node) stopListener(ctx context.Context) error {
	if l := n.remote.listener; l != nil {
		return l.Shutdown(ctx)
	}
	return nil
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

// nodeHost adapts a Node to DiscoveryHost without exporting the methods on
// Node itself.
type nodeHost struct{ n *Node }

func (h nodeHost) Self() Peer {
	n := h.n
	return Peer{ID: n.id, Instance: n.instance, Addr: n.Addr(), Transport: n.remote.transport.Name(), Digest: n.digest()}
}

func (h nodeHost) PeerUp(p Peer) {
	n := h.n
	if p.Addr == "" || p.Addr == n.Addr() || n.closed.Load() {
		return
	}
	r := n.remote
	if p.Transport != "" && p.Transport != r.transport.Name() {
		n.log.Debug("wizard: peer on another transport ignored", "addr", p.Addr, "transport", p.Transport)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.peers[p.Addr]; old != nil {
		old.suspect.Store(p.Suspect)
		refetch := p.Digest == "" || p.Digest != old.loaded
		if old.down.Swap(false) {
			// Back within downGrace (a death that was refuted): its
			// connection is still there; route its patterns again.
			old.downT.Stop()
			refetch = true
		}
		if p.Instance != "" && p.Instance != old.instance || p.ID != "" && p.ID != old.id {
			// Another run of the node at this address: whatever its digest,
			// ask it.
			old.force.Store(true)
			refetch = true
		}
		old.id, old.instance, old.digest = cmp.Or(p.ID, old.id), cmp.Or(p.Instance, old.instance), p.Digest
		if refetch {
			old.signalRefetch()
		}
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr := &peer{
		addr: p.Addr, id: p.ID, instance: p.Instance, digest: p.Digest,
		ctx: ctx, cancel: cancel, refetch: make(chan struct{}, 1), done: make(chan struct{}),
	}
	pr.suspect.Store(p.Suspect)
	pr.node, pr.target.p = n, pr
	r.peers[p.Addr] = pr
	go n.runPeer(pr)
}

func (h nodeHost) PeerDown(p Peer) {
	n := h.n
	r := n.remote
	r.mu.Lock()
	pr := r.peers[p.Addr]
	if pr != nil && p.Instance != "" && pr.instance != "" && p.Instance != pr.instance {
		r.mu.Unlock()
		n.log.Debug("wizard: death notice of an earlier run ignored", "addr", p.Addr, "instance", p.Instance)
		return
	}
	if pr == nil || pr.down.Load() {
		r.mu.Unlock()
		return
	}
	// Out of routing at once; the connection stays for downGrace, so that
	// a peer declared dead by mistake (gossip under load) comes back
	// without a new connection from every node at the same moment.
	pr.down.Store(true)
	pr.downT = time.AfterFunc(downGrace, func() { n.forgetPeer(pr) })
	r.mu.Unlock()
	n.setCatalog(pr, nil)
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

func (p *peer) signalRefetch() {
	select {
	case p.refetch <- struct{}{}:
	default: // one is pending already
	}
}

// runPeer keeps a connection to p and p's patterns in routing: dial with
// backoff, fetch the catalog, refresh it, and start over when the
// connection drops.
func (n *Node) runPeer(p *peer) {
	defer close(p.done)
	defer n.dropBreaker(p)
	defer n.setCatalog(p, nil)
	const minBackoff, maxBackoff = 20 * time.Millisecond, 2 * time.Second
	backoff := minBackoff
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
	reconnect := false
	for p.ctx.Err() == nil {
		conn, err := n.remote.transport.Dial(p.ctx, p.addr)
		if err == nil {
			// Connected before routed: a caller that sees p's patterns
			// finds its connection.
			box := &connBox{c: conn}
			p.conn.Store(box)
			if reconnect {
				// Ask the peer itself which run answers now: a refed call
				// goes only to the run it was first sent to.
				p.force.Store(true)
			}
			err = n.loadCatalog(p, box)
			if err != nil {
				p.conn.Store(nil)
				conn.Close()
			}
		}
		if err != nil {
			n.log.Debug("wizard: peer unreachable", "addr", p.addr, "err", err, "retry", backoff)
			// Full jitter keeps a fleet from reconnecting in step.
			if !wait(backoff/2 + rand.N(backoff/2+1)) {
				return
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff
		reconnect = true
		n.log.Debug("wizard: peer connected", "addr", p.addr)
		n.watchPeer(p, conn)
		p.conn.Store(nil)
		n.setCatalog(p, nil)
		conn.Close()
	}
}

// watchPeer refreshes p's catalog until its connection drops or p stops.
func (n *Node) watchPeer(p *peer, conn Conn) {
	tick := time.NewTicker(n.remote.refresh)
	defer tick.Stop()
	for {
		select {
		case <-conn.Done():
			n.log.Debug("wizard: peer connection lost", "addr", p.addr)
			return
		case <-p.ctx.Done():
			return
		case <-tick.C:
			n.remote.mu.Lock()
			gossiped := p.digest != ""
			n.remote.mu.Unlock()
			if gossiped {
				continue // discovery tells when its patterns change
			}
		case <-p.refetch:
		}
		if err := n.loadCatalog(p, p.conn.Load()); err != nil {
			n.log.Warn("wizard: catalog refresh failed", "addr", p.addr, "err", err)
		}
	}
}

// catalogJitter spreads the catalog fetches that one gossiped change
// starts across a cluster.
const catalogJitter = 20 * time.Millisecond

// loadCatalog routes p's patterns: from the cache when p's digest is known
// there, else fetched over conn.
func (n *Node) loadCatalog(p *peer, box *connBox) error {
	if box == nil {
		return ErrNotSent // the connection is gone; runPeer starts over
	}
	r := n.remote
	force := p.force.Swap(false)
	r.mu.Lock()
	d, inst := p.digest, p.instance
	pats, cached := r.catalogs[d]
	fromCache := d != "" && cached && !force
	if fromCache {
		p.loaded = d
	}
	r.mu.Unlock()
	if fromCache {
		if inst != "" && box.inst.Load() == nil {
			box.inst.Store(&inst)
		}
		n.setCatalog(p, pats)
		return nil
	}
	if d != "" {
		// A gossiped change reaches every node at about the same time.
		t := time.NewTimer(rand.N(catalogJitter))
		select {
		case <-t.C:
		case <-p.ctx.Done():
			t.Stop()
			return p.ctx.Err()
		}
	}
	return n.fetchCatalog(p, box)
}

// fetchCatalog asks p for its catalog over conn and routes its patterns.
func (n *Node) fetchCatalog(p *peer, box *connBox) error {
	ctx, cancel := context.WithTimeout(p.ctx, n.remote.defaultTimeout)
	defer cancel()
	reply, err := box.c.Call(ctx, &Message{Pattern: CatalogPattern, Meta: []MetaPair{{metaCaller, n.id}}})
	if err != nil {
		return err
	}
	if reply.Code != CodeOK {
		return &Error{Code: reply.Code, Message: reply.Error}
	}
	c, pats, err := decodeCatalog(reply.Payload)
	if err != nil {
		n.log.Warn("wizard: catalog rejected", "addr", p.addr, "err", err)
		return fmt.Errorf("wizard: bad catalog from %s: %w", p.addr, err)
	}
	r := n.remote
	r.mu.Lock()
	if p.id == "" {
		p.id = c.ID
	}
	if c.Instance != "" {
		p.instance = c.Instance
		box.inst.Store(&c.Instance)
	}
	if len(r.catalogs) >= maxCachedCatalogs {
		clear(r.catalogs)
	}
	// What was loaded, which may differ from what was announced (the peer
	// changed since, or restarted and has not added its handlers yet): a
	// later announcement of another digest fetches again.
	p.loaded = digestOf(pats)
	r.catalogs[p.loaded] = pats
	r.mu.Unlock()
	n.setCatalog(p, pats)
	return nil
}

// setCatalog makes pats the patterns p serves in routing.
func (n *Node) setCatalog(p *peer, pats []Pattern) {
	n.routeMu.Lock()
	defer n.routeMu.Unlock()
	if p.ctx.Err() != nil || p.down.Load() {
		pats = nil // the peer left: a late catalog must not bring it back
	}
	old := p.patterns
	changed := false
	for _, o := range old {
		if !slices.ContainsFunc(pats, o.Equal) {
			n.removePeerRoute(o, p)
			changed = true
		}
	}
	for _, pt := range pats {
		if !slices.ContainsFunc(old, pt.Equal) {
			n.addPeerRoute(pt, p)
			changed = true
		}
	}
	p.patterns = pats
	if changed {
		n.routingChanged()
	}
}

// addPeerRoute adds p as a target of pattern pt. Callers hold routeMu.
func (n *Node) addPeerRoute(pt Pattern, p *peer) {
	if re := n.router.exactEntry(pt); re != nil {
		r := re.value
		var peers []*peer
		if cur := r.peers.Load(); cur != nil {
			peers = slices.Clone(*cur)
		}
		peers = append(peers, p)
		n.balancerOf(r).Add(&p.target, 1)
		r.peers.Store(&peers)
		return
	}
	r := &route{pattern: pt}
	n.balancerOf(r).Add(&p.target, 1)
	r.peers.Store(&[]*peer{p}) // complete before any caller can see it
	_ = n.router.Add(pt, r)    // cannot fail: pt is absent and routeMu is held
}

// removePeerRoute removes p as a target of pattern pt, and the route when
// nothing serves it any more. Callers hold routeMu.
func (n *Node) removePeerRoute(pt Pattern, p *peer) {
	re := n.router.exactEntry(pt)
	if re == nil {
		return
	}
	r := re.value
	if cur := r.peers.Load(); cur != nil {
		peers := slices.DeleteFunc(slices.Clone(*cur), func(q *peer) bool { return q == p })
		n.balancerOf(r).Remove(&p.target)
		if len(peers) == 0 && r.local.Load() == nil {
			// Out of the router first, so no caller finds an empty route
			// where a wider pattern would answer.
			n.router.Remove(pt)
		}
		r.peers.Store(&peers)
	}
}

// outMessage is a Message with room for the metadata the node itself
// sends (caller, payload type, pattern pairs), so that both take one
// allocation.
type outMessage struct {
	Message
	meta [4]MetaPair
	id   [8]byte // the call id's bytes, which a meta value points into
}

const (
	metaCall   = "i" // the call's id among the caller's calls, 8 bytes big-endian
	metaCaller = "c" // the calling node's id
	metaType   = "t" // the protobuf full name of a CodecProto payload
	metaOver   = "o" // Act with a protobuf message: the pattern Request.Get sees
)

// callRemote sends a call to one of r's peers. A call that surely did not
// reach a peer (connection refused or lost before the request was written)
// moves on to the next peer.
func (n *Node) callRemote(ctx context.Context, r *route, msg any, over *target, cfg *callConfig) (Result, error) {
	cur := r.peers.Load()
	if cur == nil || len(*cur) == 0 || n.remote == nil {
		return n.notFound(r.pattern.String(), cfg)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return Result{}, toError(err)
	}
	if n.closed.Load() {
		return Result{}, errClosed()
	}
	if over != nil {
		if m, ok := msg.(map[string]any); ok {
			msg, over = merged(m, over), nil
		}
	}
	codec, payload, typ, err := encodePayload(msg)
	if err != nil {
		return Result{}, err
	}
	om := new(outMessage) // the message and room for its metadata, in one allocation
	m := &om.Message
	*m = Message{Pattern: r.pattern.String(), Codec: codec, Payload: payload}
	m.Meta = append(om.meta[:0], MetaPair{metaCaller, n.id})
	if typ != "" {
		m.Meta = append(m.Meta, MetaPair{metaType, typ})
	}
	if over != nil {
		m.Meta = append(m.Meta, MetaPair{metaOver, over.pattern.String()})
	}
	if cfg.noReply {
		m.Flags |= FlagNoReply
	}
	if cfg.idempotent {
		m.Flags |= FlagIdempotent
	}
	refeed := !cfg.noReply && !cfg.idempotent
	if refeed {
		// An id the call keeps if it is sent again: the serving node runs
		// it once however often it arrives.
		binary.BigEndian.PutUint64(om.id[:], n.callSeq.Add(1))
		m.Meta = append(m.Meta, MetaPair{metaCall, unsafe.String(&om.id[0], len(om.id))})
		m.Flags |= FlagKeep
	}
	timeout := n.remote.defaultTimeout
	if cfg.timeout > 0 {
		timeout = cfg.timeout
	}
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > timeout && cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	box := r.bal.Load()
	if box == nil {
		return n.notFound(r.pattern.String(), cfg)
	}
	bal := box.b
	n.remote.budget.deposit()
	pk := getPicker(n)
	defer putPicker(pk)
	var lastErr error
	var lastRefusal *Error
	refused, overloaded := 0, 0
	withdrawn := false // the budget paid for the next attempt
	for attempt := 0; ; attempt++ {
		t, ok := bal.Pick(cfg.key, pk.skipFn)
		if !ok && !pk.suspects {
			// Suspect peers get calls only when no other peer can.
			pk.suspects = true
			t, ok = bal.Pick(cfg.key, pk.skipFn)
		}
		if !ok {
			if withdrawn {
				n.remote.budget.refund() // no target left to retry on
			}
			break
		}
		withdrawn = false
		if attempt > 0 {
			m.Flags |= FlagRetry
			n.stats.retries.Add(1)
		}
		p, br := t.p, pk.br
		pk.tried = append(pk.tried, p)
		reply, err := n.callPeer(ctx, p, m, refeed)
		bal.Done(t)
		if err == nil && reply != nil && reply.Flags&FlagRefused != 0 {
			// Refused without running: shed by an overloaded node, not
			// served there any more, or closing. Another target may take
			// it.
			refused++
			switch {
			case reply.Code == CodeResourceExhausted:
				overloaded++
				if br != nil {
					br.Open()
				}
			case reply.Code == CodeNotFound:
				p.signalRefetch() // its catalog changed
				if br != nil {
					br.Success()
				}
			case br != nil:
				br.Failure()
			}
			lastRefusal = &Error{Code: reply.Code, Message: reply.Error}
			lastErr = lastRefusal
			continue
		}
		if err != nil {
			var e *Error
			switch ctxErr := ctx.Err(); {
			case ctxErr != nil:
				if br != nil {
					if ctxErr == context.DeadlineExceeded {
						br.Failure() // a timeout counts against the target
					} else {
						br.Success() // the caller gave up: nothing learnt of the target
					}
				}
				return Result{}, &Error{Code: CodeOf(ctxErr), Message: fmt.Sprintf("wizard: call %q to %s: %v", r.pattern.String(), p.addr, ctxErr), cause: ctxErr}
			case errors.Is(err, ErrNotSent):
				if br != nil {
					br.Failure()
				}
				lastErr = err
				continue // surely not run: the next target
			case errors.As(err, &e): // the transport refused it with a code
				if br != nil {
					br.Success()
				}
				return Result{}, e
			}
			if br != nil {
				br.Failure()
			}
			if cfg.idempotent {
				// It may have run; it is safe to run again elsewhere, within
				// the retry budget. (Refused and unsent calls cost their
				// target nothing and go on without it.)
				lastErr = err
				if !n.remote.budget.withdraw() {
					lastErr = fmt.Errorf("retry budget spent, last error: %w", err)
					break
				}
				withdrawn = true
				if !n.retryBackoff(ctx, attempt) {
					break
				}
				continue
			}
			return Result{}, &Error{Code: CodeUnavailable, Message: fmt.Sprintf("wizard: call %q to %s: %v", r.pattern.String(), p.addr, err), cause: err}
		}
		if br != nil {
			br.Success()
		}
		if reply == nil { // NoReply
			return Result{}, nil
		}
		if reply.Code != CodeOK {
			e := &Error{Code: reply.Code, Message: reply.Error}
			if len(reply.Payload) > 0 {
				e.Details = decodeDetails(reply.Payload)
			}
			return Result{}, e
		}
		if reply.Codec == CodecNone && len(reply.Payload) == 0 {
			return Result{}, nil // nil, as in-process
		}
		// The payload decodes lazily, into the type the caller asks for; the
		// raw view lives in the reply, so boxing it allocates nothing.
		reply.in = raw{codec: reply.Codec, data: reply.Payload, typ: metaValue(reply.Meta, metaType)}
		return Result{v: &reply.in}, nil
	}
	tried := len(pk.tried)
	if refused > 0 && refused == tried {
		if overloaded == tried {
			return Result{}, &Error{Code: CodeResourceExhausted, Message: fmt.Sprintf("wizard: every target serving %q refused the call as overloaded (%d tried)", r.pattern.String(), tried), cause: ErrOverloaded}
		}
		return Result{}, lastRefusal // as the last target refused it
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return Result{}, &Error{Code: CodeOf(ctxErr), Message: fmt.Sprintf("wizard: call %q: %v (last error: %v)", r.pattern.String(), ctxErr, lastErr), cause: ctxErr}
	}
	if lastErr == nil {
		lastErr = errors.New("no target is connected")
	}
	return Result{}, &Error{Code: CodeUnavailable, Message: fmt.Sprintf("wizard: no peer serving %q could take the call (%d tried): %v", r.pattern.String(), tried, lastErr), cause: lastErr}
}

// callPeer sends m to p, and sends it again to the same run of p when the
// connection drops after m was written and refeed is set.
func (n *Node) callPeer(ctx context.Context, p *peer, m *Message, refeed bool) (*Message, error) {
	box := p.conn.Load()
	if box == nil {
		return nil, fmt.Errorf("%w: %s is not connected", ErrNotSent, p.addr)
	}
	inst := box.instance()
	reply, err := box.c.Call(ctx, m)
	for refeed && inst != "" && lostAfterSent(err) && ctx.Err() == nil {
		// The connection dropped after the call was written: it may have
		// run. Send it again, same id, once the same run of p is back; its
		// de-duplication runs the call at most once. Another run of p (a
		// restart) does not know the call: it gets nothing.
		next := n.awaitReconnect(ctx, p, box)
		if next == nil || next.instance() != inst {
			break
		}
		box = next
		m.Flags |= FlagRetry
		n.stats.refeeds.Add(1)
		reply, err = box.c.Call(ctx, m)
	}
	return reply, err
}

// picker is the skip function of one call's picks: it passes over targets
// that are not connected, suspect (until suspects are allowed), tried
// already, or whose breaker refuses; for the target it accepts it holds
// the breaker permit it took.
type picker struct {
	n        *Node
	suspects bool
	br       Breaker
	tried    []*peer
	buf      [4]*peer           // tried's first room
	skipFn   func(*Target) bool // skip, bound once: passing it allocates nothing
}

var pickers sync.Pool

func getPicker(n *Node) *picker {
	pk, _ := pickers.Get().(*picker)
	if pk == nil {
		pk = new(picker)
		pk.skipFn = pk.skip
	}
	pk.n, pk.tried = n, pk.buf[:0]
	return pk
}

func putPicker(pk *picker) {
	fn := pk.skipFn
	*pk = picker{skipFn: fn} // nothing of the call stays reachable
	pickers.Put(pk)
}

func (pk *picker) skip(t *Target) bool {
	p := t.p
	if p.conn.Load() == nil || !pk.suspects && p.suspect.Load() || slices.Contains(pk.tried, p) {
		return true
	}
	pk.br = pk.n.breaker(p)
	return pk.br != nil && !pk.br.Allow()
}

// retryBackoff waits before the retry after attempt: full jitter over an
// exponential bound (2ms, 4ms, … 100ms). It reports false when ctx ends
// first.
func (n *Node) retryBackoff(ctx context.Context, attempt int) bool {
	bound := min(2*time.Millisecond<<min(attempt, 6), 100*time.Millisecond)
	t := time.NewTimer(rand.N(bound) + 1)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// dropBreaker tells p's breaker, if it has one that cares, that p left.
func (n *Node) dropBreaker(p *peer) {
	if b := p.breaker.Load(); b != nil {
		if d, ok := b.b.(interface{ Drop() }); ok {
			d.Drop()
		}
	}
}

// refeedWindow bounds how long a call whose connection dropped waits for
// its peer to come back before it fails.
const refeedWindow = time.Second

// lostAfterSent reports whether err says the connection was lost after the
// call was written (not refused with a code, not surely unsent).
func lostAfterSent(err error) bool {
	if err == nil {
		return false // before e below, which escapes: no allocation per call
	}
	var e *Error
	return !errors.Is(err, ErrNotSent) && !errors.As(err, &e)
}

// awaitReconnect waits until p has a connection other than old whose
// peer instance is known, polling with jittered backoff. It returns nil
// when ctx ends, p leaves or refeedWindow passes.
func (n *Node) awaitReconnect(ctx context.Context, p *peer, old *connBox) *connBox {
	const minWait, maxWait = time.Millisecond, 100 * time.Millisecond
	wait := minWait
	giveUp := time.Now().Add(refeedWindow)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		if b := p.conn.Load(); b != nil && b != old && b.instance() != "" {
			select {
			case <-b.c.Done():
			default:
				return b
			}
		}
		left := time.Until(giveUp)
		if left <= 0 {
			return nil
		}
		t.Reset(min(wait/2+rand.N(wait/2+1), left))
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil
		case <-p.ctx.Done():
			return nil
		}
		wait = min(2*wait, maxWait)
	}
}

func metaValue(meta []MetaPair, key string) string {
	for _, m := range meta {
		if m.Key == key {
			return m.Value
		}
	}
	return ""
}

// ServeMessage serves a call from another node: the catalog, or the local
// handler of the call's pattern. It implements [Server], for transports.
func (n *Node) ServeMessage(ctx context.Context, m *Message) *Message {
	if m.Pattern == CatalogPattern {
		return n.catalogReply()
	}
	t, err := n.wireTarget(m.Pattern)
	if err != nil {
		return errorReply(err)
	}
	var e *handlerEntry
	if r := n.resolve(t); r != nil {
		e = r.local.Load()
	}
	if e == nil {
		// Only local handlers serve remote calls: a node never forwards.
		return refusedReply(Errorf(CodeNotFound, "wizard: node %s has no handler for %q", n.id, m.Pattern))
	}
	var over *target
	if o := metaValue(m.Meta, metaOver); o != "" {
		if over, err = n.wireTarget(o); err != nil {
			return errorReply(err)
		}
	}
	if id := metaValue(m.Meta, metaCall); n.dedup != nil && len(id) == 8 && m.Flags&FlagNoReply == 0 {
		de, dup := n.dedup.begin(metaValue(m.Meta, metaCaller), binary.BigEndian.Uint64([]byte(id)))
		if dup {
			n.stats.duplicates.Add(1)
			reply, err := n.dedup.wait(ctx, de)
			if err != nil {
				return errorReply(err)
			}
			return reply
		}
		reply := n.serveLocal(ctx, m, e, over)
		// A refusal did not run the handler: its retry must.
		n.dedup.finish(de, reply, reply.Flags&FlagRefused == 0)
		return reply
	}
	return n.serveLocal(ctx, m, e, over)
}

// serveLocal runs a remote call on its local handler e.
func (n *Node) serveLocal(ctx context.Context, m *Message, e *handlerEntry, over *target) *Message {
	m.in = raw{codec: m.Codec, data: m.Payload, typ: metaValue(m.Meta, metaType)}
	msg := &m.in // lives in m: boxing it allocates nothing
	cfg := callConfig{noReply: m.Flags&FlagNoReply != 0}
	if cfg.noReply {
		// A no-reply handler outlives ctx: give it the caller's budget.
		cfg.timeout = m.Deadline
	}
	res, err := n.dispatch(ctx, e, msg, over, &cfg)
	if cfg.noReply {
		if err != nil {
			n.log.Warn("wizard: no-reply call refused", "pattern", m.Pattern, "err", err)
		}
		return nil
	}
	if err == errOverloaded || err == errClosing {
		return refusedReply(err)
	}
	if err != nil {
		return errorReply(err)
	}
	codec, payload, typ, err := encodePayload(res.v)
	if err != nil {
		return errorReply(err)
	}
	// The reply takes the request's place, as the Server contract allows:
	// nothing reads the request once its handler has returned, and the
	// call saves an allocation. The metadata reuses the request's room
	// (every call carries at least the caller's id).
	meta := m.Meta[:0]
	*m = Message{Codec: codec, Payload: payload}
	if typ != "" {
		m.Meta = append(meta, MetaPair{metaType, typ})
	}
	return m
}

// wireTarget is n.targets.get for a pattern received from another node.
// The string may alias the buffer of a whole frame, payload included: the
// cache keeps a copy of it, never the frame.
func (n *Node) wireTarget(s string) (*target, error) {
	if v, ok := n.targets.m.Load(s); ok {
		return v.(*target), nil
	}
	return n.targets.get(strings.Clone(s))
}

// errorReply is the reply for a failed call: its code, message and
// details (encoded in the payload).
// refusedReply is the reply for a call refused without running a handler.
func refusedReply(err error) *Message {
	r := errorReply(err)
	r.Flags |= FlagRefused
	return r
}

func errorReply(err error) *Message {
	e := toError(err)
	code := e.Code
	if code == CodeOK {
		code = CodeUnknown
	}
	reply := &Message{Code: code, Error: e.Message}
	if len(e.Details) > 0 {
		reply.Payload = appendDetails(nil, e.Details)
	}
	return reply
}

func (n *Node) catalogReply() *Message {
	pats := n.localPatterns()
	c := Catalog{ID: n.id, Digest: digestOf(pats), Instance: n.instance, Patterns: make([]string, len(pats))}
	for i, p := range pats {
		c.Patterns[i] = p.String()
	}
	b, err := json.Marshal(c)
	if err != nil {
		return errorReply(err)
	}
	return &Message{Codec: CodecJSON, Payload: b}
}
