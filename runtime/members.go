package runtime

import (
	"cmp"
	"slices"
	"strings"

	"github.com/wizardmesh/wizard/runtime/pattern"
)

// Member is a node of the mesh as this node sees it.
type Member struct {
	// ID is the node's id: as the node itself answered in its catalog; until
	// then, as discovery announced it ("" for a peer discovery named only
	// by address).
	ID string
	// Addr is the address its transport listens on.
	Addr string
	// Digest identifies its pattern set (see [Peer].Digest).
	Digest string
	// Self marks this node.
	Self bool
	// Suspect: discovery suspects it is down; it gets no new calls while
	// another target serves the pattern.
	Suspect bool
	// Connected: this node holds a connection to it now.
	Connected bool
	// Transport names the transport its address belongs to ("tcp",
	// "quic"). A peer on another transport than this node's is listed,
	// never connected: this node cannot call it.
	Transport string
	// LastError is why the last dial to it failed (or why it is not
	// called, for a peer on another transport), while it is not
	// connected; "" otherwise.
	LastError string
	// Patterns is the number of its patterns in this node's routing.
	Patterns int
	// Segment is the gossip segment it is in: this node's, since members
	// of other segments are never seen ("" without gossip segments).
	Segment string
}

// PatternInfo is one pattern in a node's routing and the targets that
// serve it.
type PatternInfo struct {
	Pattern pattern.Pattern
	// Local: this node has a handler for it.
	Local bool
	// Remote lists the peers serving it, by id (by address when the id is
	// not known), sorted; not those discovery reported down, which are
	// called for a few seconds only when no other peer can be.
	Remote []string
}

// Members returns this node and the peers it knows, this node first, the
// others by address: those it calls, and those discovery reported on
// another transport, which it cannot call. A node without a transport
// knows only itself.
func (n *Node) Members() []Member {
	self := Member{ID: n.id, Self: true, Connected: true, Addr: n.Addr(), Patterns: len(n.localPatterns())}
	if n.remote == nil {
		return []Member{self}
	}
	own := n.remote.transport.Name()
	self.Transport = own
	self.Digest = n.digest()
	r := n.remote
	r.mu.Lock()
	peers := make([]*peer, 0, len(r.peers))
	for _, p := range r.peers {
		if !p.down.Load() {
			peers = append(peers, p)
		}
	}
	out := make([]Member, 0, 1+len(peers))
	out = append(out, self)
	for _, p := range peers {
		m := Member{ID: p.id, Addr: p.addr, Digest: cmp.Or(p.loaded, p.digest), Suspect: p.suspect.Load(), Connected: p.conn.Load() != nil, Transport: own}
		if e := p.dialErr.Load(); e != nil && !m.Connected {
			m.LastError = *e
		}
		out = append(out, m)
	}
	foreign := make([]Member, 0, len(r.foreign))
	for _, p := range r.foreign {
		foreign = append(foreign, Member{ID: p.ID, Addr: p.Addr, Digest: p.Digest, Suspect: p.Suspect, Transport: p.Transport,
			LastError: "on transport " + p.Transport + "; this node speaks " + own})
	}
	r.mu.Unlock()
	n.routeMu.Lock()
	for i, p := range peers {
		out[i+1].Patterns = len(p.patterns)
	}
	n.routeMu.Unlock()
	out = append(out, foreign...)
	slices.SortFunc(out[1:], func(a, b Member) int { return strings.Compare(a.Addr, b.Addr) })
	if s, ok := r.discovery.(interface{ Segment() string }); ok {
		for i := range out {
			out[i].Segment = s.Segment()
		}
	}
	return out
}

// Patterns returns every pattern in this node's routing, local and remote,
// with the targets that serve it, in the order of [pattern.Router.List].
func (n *Node) Patterns() []PatternInfo {
	var names map[*peer]string
	if n.remote != nil {
		r := n.remote
		r.mu.Lock()
		names = make(map[*peer]string, len(r.peers))
		for _, p := range r.peers {
			names[p] = cmp.Or(p.id, p.addr)
		}
		r.mu.Unlock()
	}
	n.routeMu.Lock()
	defer n.routeMu.Unlock()
	list := n.router.List()
	out := make([]PatternInfo, 0, len(list))
	for _, pt := range list {
		re := n.exactRoute(pt)
		if re == nil {
			continue
		}
		info := PatternInfo{Pattern: pt, Local: re.local.Load() != nil}
		if ps := re.peers.Load(); ps != nil {
			for _, p := range *ps {
				if p.down.Load() {
					continue // a last resort for a few seconds, not a server
				}
				name, ok := names[p]
				if !ok {
					name = p.addr // leaving: routed still, no longer listed
				}
				info.Remote = append(info.Remote, name)
			}
			slices.Sort(info.Remote)
		}
		if !info.Local && len(info.Remote) == 0 {
			continue // served only by peers reported down
		}
		out = append(out, info)
	}
	return out // List is sorted
}
