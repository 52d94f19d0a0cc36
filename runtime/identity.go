package runtime

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// errMisidentified matches the error of a peer whose connection answers as
// a node that discovery never announced at its address: it is not routed.
var errMisidentified = errors.New("wizard: peer answers as a node not announced at its address")

// maxClaims bounds the announcements a peer keeps: a node restarted at an
// address, or another member announced at it, adds one.
const maxClaims = 4

// claim is whom discovery announced at a peer's address: a node's id and
// instance (run), either empty when not said.
type claim struct{ id, instance string }

// misidentified is the error of a peer whose connection answered as a
// node not announced at its address, or not as the node its certificate
// names.
type misidentified struct {
	addr                string
	announced, answered claim // the latest announcement; the answer
	// certified is the node id the peer's verified certificate names,
	// when the answer is not it; uncertified is set when the node
	// requires one (WithRequirePeerIdentity) and it names none.
	certified   string
	uncertified bool
}

func (e *misidentified) Error() string {
	switch {
	case e.uncertified:
		return fmt.Sprintf("wizard: peer's certificate names no node (WithRequirePeerIdentity): %s answers as %q (instance %q)",
			e.addr, e.answered.id, e.answered.instance)
	case e.certified != "":
		return fmt.Sprintf("wizard: peer's certificate names node %q: %s answers as %q (instance %q)",
			e.certified, e.addr, e.answered.id, e.answered.instance)
	}
	return fmt.Sprintf("%v: %s announced as %q (instance %q), it answers as %q (instance %q)",
		errMisidentified, e.addr, e.announced.id, e.announced.instance, e.answered.id, e.answered.instance)
}

func (e *misidentified) Unwrap() error { return errMisidentified }

// certifiedRetry is how long a peer whose certificate does not prove the
// id it answers as waits before it is dialled again, unless discovery
// reports something new of it first: a static peer is reported once, and
// may come back with another certificate.
const certifiedRetry = time.Minute

// announce records c as announced at p's address, the latest, and
// reports whether it is new there. Callers hold remote.mu.
func (p *peer) announce(c claim) bool {
	if c == (claim{}) {
		return false // an address alone (StaticPeers) names no one
	}
	i := slices.Index(p.claims, c)
	if i >= 0 {
		p.claims = slices.Delete(p.claims, i, i+1)
	} else if len(p.claims) == maxClaims {
		p.claims = slices.Delete(p.claims, 0, 1)
	}
	p.claims = append(p.claims, c)
	return i < 0
}

// misidentified returns nil when a node that answers, on a connection to
// p, as c's id and instance proves the id its certificate names
// (certified, "" for none: see [NodeURI]) and the id discovery announced
// at p's address (any node, when discovery named the address alone), else a
// [*misidentified] naming both. A run not announced of a node announced
// there is that node restarted, its announcement on the way, unless it
// is a run announced elsewhere (or this node's own): then the peer
// relays another node's catalog. Callers hold remote.mu.
func (n *Node) misidentified(p *peer, c catalog, certified string) error {
	answered := claim{c.ID, c.Instance}
	if e := n.uncertified(p, answered, certified); e != nil {
		return e
	}
	if len(p.claims) == 0 {
		return nil
	}
	sameID := false
	for _, a := range p.claims {
		if (a.id == "" || a.id == answered.id) && (a.instance == "" || a.instance == answered.instance) {
			return nil
		}
		sameID = sameID || a.id == answered.id
	}
	if sameID && !n.announcedElsewhere(p, answered) {
		return nil
	}
	return &misidentified{addr: p.addr, announced: p.claims[len(p.claims)-1], answered: answered}
}

// uncertified returns nil unless the certificate of p's peer names
// another node id (certified) than the one it answers as, or names none
// while the node requires one. Callers hold remote.mu.
func (n *Node) uncertified(p *peer, answered claim, certified string) *misidentified {
	switch {
	case certified != "" && certified != answered.id:
	case certified == "" && n.remote.requireID:
	default:
		return nil
	}
	e := &misidentified{addr: p.addr, answered: answered, certified: certified, uncertified: certified == ""}
	if len(p.claims) > 0 {
		e.announced = p.claims[len(p.claims)-1]
	}
	return e
}

// announcedElsewhere reports whether run c is this node or was announced
// at another address than p's. Callers hold remote.mu.
func (n *Node) announcedElsewhere(p *peer, c claim) bool {
	if c == (claim{n.id, n.instance}) {
		return true
	}
	for _, q := range n.remote.peers {
		if q != p && slices.Contains(q.claims, c) {
			return true
		}
	}
	return false
}

// recheck asks the peers other than p that answer as run c, not announced
// at their addresses, to answer again: c is announced at p's address now,
// so they relay it. Callers hold remote.mu.
func (r *remote) recheck(p *peer, c claim) {
	if c.instance == "" {
		return
	}
	for _, q := range r.peers {
		if q != p && q.id == c.id && q.instance == c.instance && !slices.Contains(q.claims, c) {
			q.signalRefetch()
		}
	}
}

// parkMisidentified keeps p, whose connection answered as e says, out of
// routing until discovery reports something new of its address (or, when
// its certificate is at fault, certifiedRetry passes), and reports false
// if p stops first. Each mismatch is warned of once.
func (n *Node) parkMisidentified(p *peer, e *misidentified) bool {
	msg := e.Error()
	p.dialErr.Store(&msg)
	r := n.remote
	r.mu.Lock()
	first := p.misled != *e
	p.misled = *e
	r.mu.Unlock()
	if first {
		n.warnMisidentified(e)
	}
	var retry <-chan time.Time
	if e.certified != "" || e.uncertified {
		t := time.NewTimer(certifiedRetry)
		defer t.Stop()
		retry = t.C
	}
	select {
	case <-p.revive:
		return true
	case <-retry:
		return true
	case <-p.ctx.Done():
		return false
	}
}

// warnMisidentified logs that a peer is not routed, and why.
func (n *Node) warnMisidentified(e *misidentified) {
	switch {
	case e.uncertified:
		n.log.Warn("wizard: peer not routed: its certificate names no node id, and this node requires one (WithRequirePeerIdentity)",
			"addr", e.addr, "id", e.answered.id, "instance", e.answered.instance)
	case e.certified != "":
		n.log.Warn("wizard: peer not routed: it answers as another node than its certificate names",
			"addr", e.addr, "certified", e.certified, "id", e.answered.id, "instance", e.answered.instance)
	default:
		n.log.Warn("wizard: peer not routed: it answers as another node than discovery announced at its address",
			"addr", e.addr, "announced", e.announced.id, "announced_instance", e.announced.instance, "id", e.answered.id, "instance", e.answered.instance)
	}
}
