package runtime

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// Peer describes a node as discovery reports it. Discovery says where to
// dial a node and whom to expect there; a node routes a peer's patterns
// only once the peer itself has stated them, pulled over its own
// connection, and knows it by the id and instance it answers with. Those
// must be an ID and Instance announced at that address, or a new run of
// an ID announced there whose instance was not announced at another
// address: a peer that answers as another node (relaying its catalog) is
// not routed, is warned of once, and is dialled again only when discovery
// reports something new of the address.
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
	// means this node's own. A node never calls a peer on another
	// transport: it logs a warning once per address, lists the peer in
	// [Node.Members] (not connected) and names it in the errors of calls
	// it cannot route.
	Transport string
	// Digest identifies the peer's pattern set: a short hash of its
	// patterns in canonical form, at most 32 bytes. A node pulls a peer's
	// catalog when it sees a digest it has not seen before; nodes with the
	// same digest share one cached catalog, and the pull of a digest cached
	// is answered by the digest alone. Empty means unknown: the node pulls
	// the catalog and refreshes it periodically.
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
	// suspicion): the node connects to it and pulls its catalog when the
	// digest is new to it. A peer that answered once and went away is
	// dialled again every 10 s at most; one that never answered, ever more
	// slowly, up to once a minute; one named by ID or Instance is given up
	// after 16 attempts (two to four minutes), until a PeerUp brings another
	// Instance, ID or Digest for it.
	PeerUp(p Peer)
	// PeerDown reports a peer that left or died: it gets no new calls at
	// once while another target serves the pattern, and for 5 s it is the
	// last resort over the connection it has (a death notice may be stale:
	// gossip after a partition heals); then it is forgotten. A PeerDown
	// whose Instance differs from the one the node knows at that address
	// (a restarted node reusing it) is ignored.
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
// address, pulls its catalog, keeps it fresh, and reconnects with backoff
// when a connection drops: quickly at first, then ever more slowly, up to
// once a minute for an address that has not answered for a while. A static
// peer is never given up: it is routed within a minute of starting. An
// address the node's transport rejects ([AddrChecker]; "host:port" for
// TCP and QUIC) fails [New].
func StaticPeers(addrs ...string) Discovery { return staticPeers(slices.Clone(addrs)) }

func (s staticPeers) Start(h DiscoveryHost) error {
	if nh, ok := h.(nodeHost); ok {
		if err := s.check(nh.n.remote.transport); err != nil {
			return err
		}
	}
	for _, a := range s {
		h.PeerUp(Peer{Addr: a})
	}
	return nil
}

// check checks each address with t, when t can.
func (s staticPeers) check(t Transport) error {
	c, ok := t.(AddrChecker)
	if !ok {
		return nil
	}
	for _, a := range s {
		if err := c.CheckAddr(a); err != nil {
			return fmt.Errorf("StaticPeers: %q is not a %s address: %w", a, t.Name(), err)
		}
	}
	return nil
}

func (staticPeers) Close() error { return nil }

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
		r.mu.Lock()
		_, known := r.foreign[p.Addr]
		if known || len(r.foreign) < maxForeign {
			r.foreign[p.Addr] = p
		}
		r.mu.Unlock()
		if !known {
			n.log.Warn("wizard: peer on another transport: not called", "addr", p.Addr, "id", p.ID, "transport", p.Transport, "own", r.transport.Name())
		}
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
			// Another run of the node at this address, or a claim the node
			// there contradicted: whatever its digest, ask it.
			refetch = true
			signal(old.revive)
		}
		if p.Digest != old.digest {
			signal(old.revive)
		}
		old.id, old.instance, old.digest = cmp.Or(p.ID, old.id), cmp.Or(p.Instance, old.instance), p.Digest
		if c := (claim{p.ID, p.Instance}); old.announce(c) {
			r.recheck(old, c)
		}
		if refetch {
			old.signalRefetch()
		}
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr := &peer{
		addr: p.Addr, id: p.ID, instance: p.Instance, digest: p.Digest, named: p.ID != "" || p.Instance != "",
		ctx: ctx, cancel: cancel, refetch: make(chan struct{}, 1), revive: make(chan struct{}, 1), done: make(chan struct{}),
		token: newToken(),
	}
	pr.suspect.Store(p.Suspect)
	if c := (claim{p.ID, p.Instance}); pr.announce(c) {
		r.recheck(pr, c)
	}
	pr.node, pr.target.p = n, pr
	r.peers[p.Addr] = pr
	go n.runPeer(pr)
}

func (h nodeHost) PeerDown(p Peer) {
	n := h.n
	r := n.remote
	r.mu.Lock()
	delete(r.foreign, p.Addr)
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
	// A last resort at once: calls go to it only when no other peer can
	// take them, as to a suspect, over the connection it has (a new one
	// routes nothing). The connection stays for downGrace, so that a peer
	// declared dead by mistake (gossip under load, or a stale death
	// notice gossiped on after a partition healed) keeps serving the
	// patterns no one else serves, and comes back without a new
	// connection from every node at the same moment.
	pr.down.Store(true)
	pr.downT = time.AfterFunc(downGrace, func() { n.forgetPeer(pr) })
	r.mu.Unlock()
}
