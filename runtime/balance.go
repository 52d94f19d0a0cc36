package runtime

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/wizardmesh/wizard/runtime/pattern"
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
// several (the MicroWizard ring, random, least-in-flight, consistent
// hash); without WithBalancer a node picks the cheaper of two random
// targets by [Target.Latency] × ([Target.InFlight] + 1), which routes
// around slow and silent peers.
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
func WithBalancer(newBalancer func(pattern.Pattern) Balancer) Option {
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

// latencyBalancer is the default Balancer: the power of two choices,
// avoiding slow peers. Each pick draws two targets at random; when one
// is stalled (calls wait on it, and it has answered none for four times
// its average answer time, 5ms at least) and the other not, the other
// wins; when one's [Target.Latency] is more than [slowFactor] times the
// other's, the other wins; else the one with fewer calls in flight for its
// weight (ties: the first drawn). Healthy peers share the calls evenly, as least-in-flight
// balancers do; a peer that answers far slower than the others, fails, or
// has stopped answering while calls wait on it gets no calls within
// milliseconds, and is tried again as its average decays (a second's time
// constant). If skip rejects both, every target is walked from a random
// start.
type latencyBalancer struct {
	mu    sync.Mutex                 // serialises changes
	table atomic.Pointer[[]weighted] // the targets, never changed once stored
}

type weighted struct {
	t *Target
	w int64
}

func (b *latencyBalancer) Add(t *Target, w int) bool {
	w = min(max(w, 1), 1<<31-1)
	b.mu.Lock()
	defer b.mu.Unlock()
	i := b.index(t)
	if i >= 0 {
		l := slices.Clone(b.list())
		l[i].w = int64(w)
		b.publish(l)
		return false
	}
	b.publish(append(slices.Clone(b.list()), weighted{t, int64(w)}))
	return true
}

func (b *latencyBalancer) Remove(t *Target) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := b.index(t)
	if i < 0 {
		return false
	}
	b.publish(slices.Delete(slices.Clone(b.list()), i, i+1))
	return true
}

// index is t's place in list, or -1. The caller holds mu.
func (b *latencyBalancer) index(t *Target) int {
	return slices.IndexFunc(b.list(), func(e weighted) bool { return e.t == t })
}

// list returns the targets (nil for none). A route's balancer lives as
// long as the route, one per pattern peers serve: it holds its list once.
func (b *latencyBalancer) list() []weighted {
	if l := b.table.Load(); l != nil {
		return *l
	}
	return nil
}

// publish makes l the list. The caller holds mu; l is not changed after.
func (b *latencyBalancer) publish(l []weighted) {
	b.table.Store(&l)
}

func (b *latencyBalancer) Len() int {
	if l := b.table.Load(); l != nil {
		return len(*l)
	}
	return 0
}

func (b *latencyBalancer) Done(*Target) {}

func (b *latencyBalancer) Pick(_ string, skip func(*Target) bool) (*Target, bool) {
	lp := b.table.Load()
	if lp == nil || len(*lp) == 0 {
		return nil, false
	}
	l := *lp
	n := len(l)
	if n > 1 {
		i := rand.IntN(n)
		j := rand.IntN(n - 1)
		if j >= i {
			j++
		}
		first, second := l[i], l[j]
		if cheaper(second, first, clock()) {
			first, second = second, first
		}
		if !skip(first.t) {
			return first.t, true
		}
		if !skip(second.t) {
			return second.t, true
		}
	}
	start := rand.IntN(n)
	for k := range n {
		if t := l[(start+k)%n].t; !skip(t) {
			return t, true
		}
	}
	return nil, false
}

// slowFactor is how much slower than the other of a pair a target must
// be expected to answer to lose the pick whatever its calls in flight.
const slowFactor = 2

// cheaper reports whether a call to a is expected to go better than one
// to c at clock reading now.
func cheaper(a, c weighted, now int64) bool {
	la, lc := &a.t.p.load, &c.t.p.load
	ra, sa := la.expect(now)
	rc, sc := lc.expect(now)
	if sa != sc {
		return sc
	}
	if ra > 0 && rc > 0 {
		switch {
		case ra > slowFactor*rc:
			return false
		case rc > slowFactor*ra:
			return true
		}
	}
	return (la.inFlight.Load()+1)*c.w < (lc.inFlight.Load()+1)*a.w
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
		b = new(latencyBalancer)
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
