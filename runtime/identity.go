package runtime

import (
	"errors"
	"fmt"
	"slices"
)

// errMisidentified rejects a peer whose connection answers as a node that
// discovery never announced at its address: it is not routed.
var errMisidentified = errors.New("wizard: peer answers as a node not announced at its address")

// maxClaims bounds the announcements a peer keeps: a node restarted at an
// address, or another member announced at it, adds one.
const maxClaims = 4

// claim is whom discovery announced at a peer's address: a node's id and
// instance (run), either empty when not said.
type claim struct{ id, instance string }

// announce records c as announced at p's address, the latest. Callers
// hold remote.mu.
func (p *peer) announce(c claim) {
	if c == (claim{}) {
		return // an address alone (StaticPeers) names no one
	}
	p.claims = slices.DeleteFunc(p.claims, func(o claim) bool { return o == c })
	if len(p.claims) == maxClaims {
		p.claims = slices.Delete(p.claims, 0, 1)
	}
	p.claims = append(p.claims, c)
}

// proves reports whether a node that answers, on a connection to p, as id
// and instance is one discovery announced at p's address (any node, when
// discovery named the address alone). Callers hold remote.mu.
func (p *peer) proves(id, instance string) bool {
	if len(p.claims) == 0 {
		return true
	}
	for _, c := range p.claims {
		if (c.id == "" || c.id == id) && (c.instance == "" || c.instance == instance) {
			return true
		}
	}
	return false
}

// misidentified checks the id and instance a peer's connection answered
// with against what discovery announced at its address, and, on a
// mismatch, says whether that mismatch is new (to be logged, once) and
// returns an [errMisidentified] naming both. Callers hold remote.mu.
func (p *peer) misidentified(c catalog) (bool, error) {
	answered := claim{c.ID, c.Instance}
	if p.proves(answered.id, answered.instance) {
		p.misled = [2]claim{}
		return false, nil
	}
	announced := p.claims[len(p.claims)-1]
	first := p.misled != [2]claim{announced, answered}
	p.misled = [2]claim{announced, answered}
	return first, fmt.Errorf("%w: announced as %q (instance %q), it answers as %q (instance %q)",
		errMisidentified, announced.id, announced.instance, answered.id, answered.instance)
}
