package runtime

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/wizardmesh/wizard/runtime/discovery"
)

type staticPeers []string

// StaticPeers is discovery without gossip: the node connects to each
// address, pulls its catalog, keeps it fresh, and reconnects with backoff
// when a connection drops: quickly at first, then ever more slowly, up to
// once a minute for an address that has not answered for a while. A static
// peer is never given up: it is routed within a minute of starting. An
// address the node's transport rejects ([AddrChecker]; "host:port" for
// TCP and QUIC) fails [New].
func StaticPeers(addrs ...string) discovery.Discovery { return staticPeers(slices.Clone(addrs)) }

func (s staticPeers) Start(h discovery.Host) error {
	if nh, ok := h.(nodeHost); ok {
		if err := s.check(nh.n.remote.transport); err != nil {
			return err
		}
	}
	for _, a := range s {
		h.PeerUp(discovery.Peer{Addr: a})
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

// nodeHost adapts a Node to discovery.Host without exporting the methods on
// Node itself.
type nodeHost struct{ n *Node }

func (h nodeHost) Self() discovery.Peer {
	n := h.n
	return discovery.Peer{ID: n.id, Instance: n.instance, Addr: n.Addr(), Transport: n.remote.transport.Name(), Digest: n.digest()}
}

func (h nodeHost) PeerUp(p discovery.Peer) {
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
		announced := old.digest
		old.id, old.instance, old.digest = cmp.Or(p.ID, old.id), cmp.Or(p.Instance, old.instance), p.Digest
		if announced != p.Digest {
			r.uncacheUnused(announced)
		}
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

func (h nodeHost) PeerDown(p discovery.Peer) {
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
