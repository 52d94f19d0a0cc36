package discovery

import (
	"cmp"
	"errors"
	"fmt"
	"sync"
)

// multiDiscovery runs several discoveries for one node and reports their
// union: a peer is up while any of them reports it up, and down only once
// every one that reported it has reported it gone.
type multiDiscovery struct {
	ds []Discovery

	mu      sync.Mutex
	host    Host
	peers   map[string]*multiPeer // by address
	started int                   // how many of ds started
}

// multiPeer is what each discovery reports of one address.
type multiPeer struct {
	by   map[int]Peer // by the index of the discovery, while it reports it up
	sent Peer         // the merged report forwarded last
}

// Multi runs every one of ds for a node, as one [Discovery]: for
// instance gossip (runtime/swim) among the nodes that can reach each other
// beside a broker's discovery (runtime/nats) that spans networks. A peer
// is up while any of them reports it, with the latest non-empty id,
// instance, transport and digest any of them gave, and suspect only when
// every one reporting it suspects it; it is down once each that reported
// it has reported it down. Every discovery that announces this node
// ([SelfAnnouncer]) re-announces when its patterns change. Start fails,
// closing those started, when one fails; Close closes them all.
func Multi(ds ...Discovery) (Discovery, error) {
	if len(ds) == 0 {
		return nil, errors.New("wizard: discovery.Multi: no discovery given")
	}
	for i, d := range ds {
		if d == nil {
			return nil, fmt.Errorf("wizard: discovery.Multi: discovery %d of %d is nil", i+1, len(ds))
		}
	}
	return &multiDiscovery{ds: append([]Discovery(nil), ds...), peers: map[string]*multiPeer{}}, nil
}

var (
	_ Discovery     = (*multiDiscovery)(nil)
	_ SelfAnnouncer = (*multiDiscovery)(nil)
)

func (m *multiDiscovery) Start(host Host) error {
	m.mu.Lock()
	m.host = host
	m.mu.Unlock()
	for i, d := range m.ds {
		if err := d.Start(multiHost{m, i}); err != nil {
			for _, s := range m.ds[:i] {
				_ = s.Close()
			}
			return fmt.Errorf("wizard: discovery.Multi: discovery %d of %d: %w", i+1, len(m.ds), err)
		}
		m.mu.Lock()
		m.started = i + 1
		m.mu.Unlock()
	}
	return nil
}

func (m *multiDiscovery) Close() error {
	m.mu.Lock()
	n := m.started
	m.started = 0
	m.mu.Unlock()
	var errs []error
	for i, d := range m.ds[:n] {
		if err := d.Close(); err != nil {
			errs = append(errs, fmt.Errorf("discovery %d of %d: %w", i+1, len(m.ds), err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("wizard: discovery.Multi: %w", errors.Join(errs...))
	}
	return nil
}

// SelfChanged tells every discovery that announces the node.
func (m *multiDiscovery) SelfChanged() {
	for _, d := range m.ds {
		if a, ok := d.(SelfAnnouncer); ok {
			a.SelfChanged()
		}
	}
}

// up records discovery i's report of p and forwards the merged report
// when it changed. Reports are forwarded under m.mu, so that the node sees
// them in the order they were merged (the host does not block).
func (m *multiDiscovery) up(i int, p Peer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mp := m.peers[p.Addr]
	if mp == nil {
		mp = &multiPeer{by: map[int]Peer{}}
		m.peers[p.Addr] = mp
	}
	mp.by[i] = p
	if merged := mp.merge(i); merged != mp.sent {
		mp.sent = merged
		m.host.PeerUp(merged)
	}
}

// merge is the peer as all of mp's reports tell, discovery i's first:
// the others fill in what it left empty, unless they speak of another run
// of the node.
func (mp *multiPeer) merge(i int) Peer {
	out := mp.by[i]
	suspect := out.Suspect
	for j, p := range mp.by {
		if j == i || out.Instance != "" && p.Instance != "" && p.Instance != out.Instance {
			continue
		}
		out.ID = cmp.Or(out.ID, p.ID)
		out.Instance = cmp.Or(out.Instance, p.Instance)
		out.Transport = cmp.Or(out.Transport, p.Transport)
		out.Digest = cmp.Or(out.Digest, p.Digest)
		suspect = suspect && p.Suspect
	}
	out.Suspect = suspect
	return out
}

// down records discovery i's report that p left, and forwards it when no
// other discovery reports p up (else the merged report of the others,
// when it changed).
func (m *multiDiscovery) down(i int, p Peer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mp := m.peers[p.Addr]
	if mp != nil {
		delete(mp.by, i)
	}
	if mp == nil || len(mp.by) == 0 {
		delete(m.peers, p.Addr)
		m.host.PeerDown(p)
		return
	}
	for j := range mp.by {
		if rest := mp.merge(j); rest != mp.sent {
			mp.sent = rest
			m.host.PeerUp(rest)
		}
		break
	}
}

// multiHost is the host that discovery i of m sees.
type multiHost struct {
	m *multiDiscovery
	i int
}

func (h multiHost) Self() Peer {
	h.m.mu.Lock()
	host := h.m.host
	h.m.mu.Unlock()
	return host.Self()
}

func (h multiHost) PeerUp(p Peer) {
	if p.Addr == "" {
		return
	}
	h.m.up(h.i, p)
}

func (h multiHost) PeerDown(p Peer) { h.m.down(h.i, p) }
