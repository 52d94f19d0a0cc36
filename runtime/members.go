package runtime

import (
	"cmp"
	"slices"
	"strings"

	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/introspect"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// Members returns this node and the peers it knows, this node first, the
// others by address: those it calls, and those discovery reported on
// another transport, which it cannot call. A node without a transport
// knows only itself.
func (n *Node) Members() []introspect.Member {
	self := introspect.Member{ID: n.id, Self: true, Connected: true, Addr: n.Addr(), Patterns: len(n.localPatterns()), Subscriptions: len(n.localSubscriptions())}
	if n.remote == nil {
		return []introspect.Member{self}
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
	out := make([]introspect.Member, 0, 1+len(peers))
	out = append(out, self)
	for _, p := range peers {
		m := introspect.Member{ID: p.id, Addr: p.addr, Digest: cmp.Or(p.loaded, p.digest), Suspect: p.suspect.Load(), Connected: p.conn.Load() != nil, Transport: own}
		if e := p.dialErr.Load(); e != nil && !m.Connected {
			m.LastError = *e
		}
		out = append(out, m)
	}
	foreign := make([]introspect.Member, 0, len(r.foreign))
	for _, p := range r.foreign {
		foreign = append(foreign, introspect.Member{ID: p.ID, Addr: p.Addr, Digest: p.Digest, Suspect: p.Suspect, Transport: p.Transport,
			LastError: "on transport " + p.Transport + "; this node speaks " + own})
	}
	r.mu.Unlock()
	n.routeMu.Lock()
	for i, p := range peers {
		out[i+1].Patterns = handlerPatterns(p.patterns)
		out[i+1].Subscriptions = len(p.patterns) - out[i+1].Patterns
	}
	n.routeMu.Unlock()
	out = append(out, foreign...)
	slices.SortFunc(out[1:], func(a, b introspect.Member) int { return strings.Compare(a.Addr, b.Addr) })
	if s, ok := r.discovery.(discovery.Segmented); ok {
		for i := range out {
			out[i].Segment = s.Segment()
		}
	}
	return out
}

// Patterns returns every pattern in this node's routing, local and remote,
// with the targets that serve it, in the order of [pattern.Router.List].
func (n *Node) Patterns() []introspect.PatternInfo {
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
	out := make([]introspect.PatternInfo, 0, len(list))
	for _, pt := range list {
		re := n.exactRoute(pt)
		if re == nil {
			continue
		}
		info := introspect.PatternInfo{Pattern: pt, Local: re.local.Load() != nil}
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

// Subscriptions returns every subscription in this node's routing, its
// own and its peers', with the nodes that hold each, sorted by group and
// pattern.
func (n *Node) Subscriptions() []introspect.SubscriptionInfo {
	var out []introspect.SubscriptionInfo
	at := func(p pattern.Pattern, g string) *introspect.SubscriptionInfo {
		for i := range out {
			if out[i].Group == g && out[i].Pattern.Equal(p) {
				return &out[i]
			}
		}
		out = append(out, introspect.SubscriptionInfo{Pattern: p, Group: g})
		return &out[len(out)-1]
	}
	for _, s := range n.localSubscriptions() {
		at(s.pattern, s.group).Local = true
	}
	for _, sr := range n.remoteSubscriptions() {
		ps := sr.r.peers.Load()
		if ps == nil {
			continue
		}
		var names []string
		for _, p := range *ps {
			if !p.down.Load() {
				names = append(names, n.peerName(p))
			}
		}
		if len(names) > 0 {
			info := at(sr.pattern, sr.group)
			info.Remote = append(info.Remote, names...)
			slices.Sort(info.Remote)
		}
	}
	slices.SortFunc(out, func(a, b introspect.SubscriptionInfo) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Pattern.String(), b.Pattern.String()))
	})
	return out
}

// handlerPatterns counts the patterns of pats that are handlers', not
// subscriptions'.
func handlerPatterns(pats []pattern.Pattern) int {
	k := 0
	for _, p := range pats {
		if _, ok := p.Get(groupKey); !ok {
			k++
		}
	}
	return k
}
