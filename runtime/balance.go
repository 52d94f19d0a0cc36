package runtime

import (
	"github.com/wizardmesh/wizard/runtime/internal/ring"
)

// Target is a peer serving a pattern, as balancers and breakers see it.
// Each peer has one Target for as long as the node knows it; compare them
// by pointer.
type Target struct {
	p *peer
}

// ID returns the peer's node id ("" until its catalog arrives).
func (t *Target) ID() string {
	r := t.p.node.remote
	r.mu.Lock()
	defer r.mu.Unlock()
	return t.p.id
}

// Addr returns the address the peer's transport listens on.
func (t *Target) Addr() string { return t.p.addr }

// Suspect reports whether discovery suspects the peer is down.
func (t *Target) Suspect() bool { return t.p.suspect.Load() }

// Balancer chooses a target for each remote call to one pattern. A node
// makes one per routed pattern with the function given to [WithBalancer]
// and adds and removes targets as peers come and go. runtime/lb has
// several (ring, random, least-in-flight, consistent hash); without
// WithBalancer a node uses the MicroWizard ring: round robin, weight 1.
// Implementations are safe for concurrent use.
type Balancer interface {
	// Add puts t in the set with a weight, or changes its weight.
	Add(t *Target, weight int) bool
	// Remove takes t out of the set.
	Remove(t *Target) bool
	// Len returns the number of targets.
	Len() int
	// Pick chooses a target. key is the call's [RouteKey] ("" when none).
	// skip rejects targets that cannot take the call now (not connected,
	// breaker open, tried already); Pick returns the first target skip
	// accepts, and false when there is none. skip takes a breaker permit
	// for the target it accepts.
	Pick(key string, skip func(*Target) bool) (*Target, bool)
	// Done reports that a call to t, picked before, is over.
	Done(t *Target)
}

// Breaker guards the calls to one target: runtime/lb has one on
// failsafe-go. A node asks for a permit before each call and reports how
// the call went: Failure for a transport error or a timeout, Open for an
// overload answer (the target shed the call), Success otherwise.
type Breaker interface {
	// Allow takes a permit for one call, or reports false: skip the target.
	Allow() bool
	Success()
	Failure()
	Open()
}

// WithBalancer sets how the node balances the remote calls of a pattern:
// newBalancer is called once for each pattern that remote peers serve.
func WithBalancer(newBalancer func(Pattern) Balancer) Option {
	return nodeOption(func(c *nodeConfig) { c.newBalancer = newBalancer })
}

// WithBreakers gives each target a circuit breaker, made by newBreaker when
// the node first calls the target and dropped when the target leaves (a
// Breaker with a Drop method is told, so that a set keeping breakers by
// target can forget it: runtime/lb's does).
// Without it, targets have no breaker: overloaded or failing targets are
// still skipped for the call at hand, not for the calls after it.
func WithBreakers(newBreaker func(*Target) Breaker) Option {
	return nodeOption(func(c *nodeConfig) { c.newBreaker = newBreaker })
}

// ringBalancer is the default Balancer: the MicroWizard ring.
type ringBalancer struct{ r ring.Ring[*Target] }

func (b *ringBalancer) Add(t *Target, w int) bool { return b.r.Add(t, w) }

func (b *ringBalancer) Remove(t *Target) bool { return b.r.Remove(t) }

func (b *ringBalancer) Len() int { return b.r.Len() }

func (b *ringBalancer) Done(*Target) {}

func (b *ringBalancer) Pick(_ string, skip func(*Target) bool) (*Target, bool) {
	return b.r.Pick(skip)
}

// balancerBox holds a route's balancer, set once.
type balancerBox struct{ b Balancer }

// balancer returns r's balancer, making it on first use. Callers hold
// routeMu.
func (n *Node) balancerOf(r *route) Balancer {
	if box := r.bal.Load(); box != nil {
		return box.b
	}
	var b Balancer
	if f := n.remote.newBalancer; f != nil {
		b = f(r.pattern)
	}
	if b == nil {
		b = new(ringBalancer)
	}
	r.bal.Store(&balancerBox{b})
	return b
}

// breaker returns p's breaker, making it on first use; one that always
// permits without WithBreakers.
func (n *Node) breaker(p *peer) Breaker {
	f := n.remote.newBreaker
	if f == nil {
		return noBreaker{}
	}
	if b := p.breaker.Load(); b != nil {
		return b.b
	}
	nb := f(&p.target)
	if nb == nil {
		nb = noBreaker{}
	}
	b := &breakerBox{nb}
	if !p.breaker.CompareAndSwap(nil, b) {
		return p.breaker.Load().b
	}
	return b.b
}

type breakerBox struct{ b Breaker }

// noBreaker is the breaker of a target when the node has no breakers: it
// always permits and learns nothing.
type noBreaker struct{}

func (noBreaker) Allow() bool { return true }
func (noBreaker) Success()    {}
func (noBreaker) Failure()    {}
func (noBreaker) Open()       {}

// dropBreaker tells p's breaker, if it has one that cares, that p left.
func (n *Node) dropBreaker(p *peer) {
	if b := p.breaker.Load(); b != nil {
		if d, ok := b.b.(interface{ Drop() }); ok {
			d.Drop()
		}
	}
}
