package swim

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/wizardmesh/wizard/runtime/discovery"
)

// memberlist calls its delegates with its own lock held, so they only
// queue events; one goroutine (runEvents) applies them in order to the
// member table and reports to the node.

// delegate is the Discovery's side of memberlist's delegate interfaces,
// kept off the Discovery's exported method set.
type delegate struct{ d *Discovery }

var (
	_ memberlist.Delegate      = (*delegate)(nil)
	_ memberlist.EventDelegate = (*delegate)(nil)
	_ memberlist.AliveDelegate = (*delegate)(nil)
)

// NodeMeta hands memberlist this node's meta, encoded and validated
// beforehand (at Start and on every re-announcement), so it is never
// over the limit.
func (g *delegate) NodeMeta(limit int) []byte {
	p := g.d.meta.Load()
	if p == nil || len(*p) > limit {
		// Unreachable: valid metas are at most maxMetaLen bytes.
		g.d.log.Error("wizard: swim: node meta over memberlist's limit", "limit", limit)
		return nil
	}
	return *p
}

func (*delegate) NotifyMsg([]byte)                           {}
func (*delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (*delegate) LocalState(join bool) []byte                { return nil }
func (*delegate) MergeRemoteState(buf []byte, join bool)     {}

// NotifyAlive keeps members whose meta this node cannot use out of
// memberlist altogether: malformed meta, another wizard protocol, another
// segment. memberlist logs the returned error (a Warn line) and ignores
// the alive message.
func (g *delegate) NotifyAlive(n *memberlist.Node) error {
	if n.Name == g.d.name {
		return nil
	}
	_, err := g.d.checkMember(n.Name, n.Meta)
	return err
}

func (g *delegate) NotifyJoin(n *memberlist.Node) {
	g.d.live.up(n.Name, n.Address())
	g.d.failed.alive(n.Name, n.Address())
	g.d.events.push(event{name: n.Name, meta: slices.Clone(n.Meta)})
}
func (g *delegate) NotifyUpdate(n *memberlist.Node) {
	g.d.live.up(n.Name, n.Address())
	g.d.failed.alive(n.Name, n.Address())
	g.d.events.push(event{name: n.Name, meta: slices.Clone(n.Meta)})
}

// NotifyLeave reports a member gone, and keeps it to reconnect to in case
// it failed rather than left: memberlist passes both the same way, and
// runSuspicionWatch tells them apart.
func (g *delegate) NotifyLeave(n *memberlist.Node) {
	g.d.live.down(n.Name)
	if g.d.reconnectEvery > 0 && n.Name != g.d.name {
		g.d.failed.gone(n.Name, n.Address(), time.Now())
	}
	g.d.events.push(event{name: n.Name, leave: true})
}

// checkMember decodes a member's meta and checks that this node can use it.
func (d *Discovery) checkMember(name string, b []byte) (meta, error) {
	if _, _, ok := splitName(name); !ok {
		return meta{}, fmt.Errorf("wizard: swim: member name %q is not a wizard node's (id/boot)", name)
	}
	m, err := decodeMeta(b)
	switch {
	case err != nil:
		return meta{}, fmt.Errorf("member %q: %w", name, err)
	case m.Protocol != protocolVersion:
		return meta{}, fmt.Errorf("wizard: swim: member %q speaks wizard protocol %d, this node %d", name, m.Protocol, protocolVersion)
	case m.Segment != d.cfg.segment:
		return meta{}, fmt.Errorf("wizard: swim: member %q is in segment %q, this node in %q", name, m.Segment, d.cfg.segment)
	}
	return m, nil
}

// event is a change memberlist reported, or a suspicion snapshot.
type event struct {
	name    string
	meta    []byte
	leave   bool
	suspect map[string]bool // a snapshot of every live member: name → suspect
}

// eventQueue is an unbounded FIFO: memberlist must never wait on the node.
type eventQueue struct {
	mu     sync.Mutex
	q      []event
	closed bool
	wake   chan struct{} // capacity 1
}

func (q *eventQueue) init() { q.wake = make(chan struct{}, 1) }

func (q *eventQueue) push(e event) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.q = append(q.q, e)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *eventQueue) take() []event {
	q.mu.Lock()
	defer q.mu.Unlock()
	es := q.q
	q.q = nil
	return es
}

func (q *eventQueue) close() {
	q.mu.Lock()
	q.closed, q.q = true, nil
	q.mu.Unlock()
}

// member is one other node as this node reported it.
type member struct {
	peer discovery.Peer
}

// members is the member table runEvents keeps: every other live member,
// and which of them owns each address. Two members share an address when a
// node restarts on it (same id, new boot): the one seen up last owns it,
// and only the owner's changes reach the node, which knows peers by
// address.
type members struct {
	byName map[string]*member
	owner  map[string]string // address → name
}

// runEvents applies events to the member table and reports the changes to
// the node, until Close.
func (d *Discovery) runEvents(ctx context.Context) {
	defer d.wg.Done()
	defer d.events.close()
	ms := &members{byName: map[string]*member{}, owner: map[string]string{}}
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.events.wake:
		}
		for _, e := range d.events.take() {
			if ctx.Err() != nil {
				return
			}
			switch {
			case e.suspect != nil:
				d.applySuspicion(ms, e.suspect)
			case e.name == d.name:
			case e.leave:
				d.memberLeft(ms, e.name)
			default:
				d.memberUp(ms, e.name, e.meta)
			}
		}
	}
}

// memberUp records a member that joined or changed, and reports it.
func (d *Discovery) memberUp(ms *members, name string, b []byte) {
	m, err := d.checkMember(name, b)
	if err != nil {
		d.log.Warn("wizard: swim: ignoring member", "member", name, "err", err)
		d.memberLeft(ms, name) // if its earlier meta was good
		return
	}
	if m.Addr == "" {
		// A node that only calls (no listener): nothing to route to it.
		d.memberLeft(ms, name)
		return
	}
	id, boot, _ := splitName(name)
	p := discovery.Peer{ID: id, Instance: boot, Addr: m.Addr, Transport: m.Transport, Digest: m.Digest}
	if old := ms.byName[name]; old != nil {
		p.Suspect = old.peer.Suspect
		if old.peer == p && ms.owner[p.Addr] == name {
			return
		}
		if old.peer.Addr != p.Addr {
			d.memberLeft(ms, name)
		}
	}
	ms.byName[name] = &member{peer: p}
	ms.owner[p.Addr] = name
	d.log.Debug("wizard: swim: member up", "member", name, "addr", p.Addr, "digest", p.Digest)
	d.host.PeerUp(p)
}

// memberLeft forgets a member that left or died. When it owned its
// address, the node hears that the address is down, or, when another
// member uses the address too, that this one owns it now.
func (d *Discovery) memberLeft(ms *members, name string) {
	old := ms.byName[name]
	if old == nil {
		return
	}
	delete(ms.byName, name)
	addr := old.peer.Addr
	if ms.owner[addr] != name {
		d.log.Debug("wizard: swim: member gone; its address has a newer owner", "member", name, "addr", addr)
		return
	}
	delete(ms.owner, addr)
	for other, m := range ms.byName {
		if m.peer.Addr == addr {
			ms.owner[addr] = other
			d.log.Debug("wizard: swim: member gone; another owns its address now", "member", name, "owner", other, "addr", addr)
			d.host.PeerUp(m.peer)
			return
		}
	}
	d.log.Debug("wizard: swim: member down", "member", name, "addr", addr)
	d.host.PeerDown(old.peer)
}

// applySuspicion records the members whose suspicion changed and reports
// those that own their address.
func (d *Discovery) applySuspicion(ms *members, suspect map[string]bool) {
	for name, m := range ms.byName {
		s, ok := suspect[name]
		if !ok || s == m.peer.Suspect {
			continue
		}
		m.peer.Suspect = s
		if ms.owner[m.peer.Addr] == name {
			d.log.Debug("wizard: swim: member suspicion", "member", name, "suspect", s)
			d.host.PeerUp(m.peer)
		}
	}
}
