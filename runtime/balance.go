package runtime

import (
	"sync/atomic"

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

// Stats are a node's counters since it started.
type Stats struct {
	// Shed counts the calls this node refused as over its in-flight limit.
	Shed uint64
	// Retries counts the attempts this node sent to another target after
	// an attempt failed or was refused.
	Retries uint64
	// Refeeds counts the calls this node sent again, same id, to the same
	// run of a peer after the connection dropped.
	Refeeds uint64
	// Duplicates counts the calls this node received again and answered
	// from its de-duplication table (joining the running call or with the
	// stored answer) without running the handler.
	Duplicates uint64
}

type stats struct{ shed, retries, refeeds, duplicates atomic.Uint64 }

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	return Stats{
		Shed:       n.stats.shed.Load(),
		Retries:    n.stats.retries.Load(),
		Refeeds:    n.stats.refeeds.Load(),
		Duplicates: n.stats.duplicates.Load(),
	}
}

// ringBalancer is the default Balancer: the MicroWizard ring.
type ringBalancer struct{ r ring.Ring[*Target] }

func (b *ringBalancer) Add(t *Target, w int) bool { return b.r.Add(t, w) }
func (b *ringBalancer) Remove(t *Target) bool     { return b.r.Remove(t) }
func (b *ringBalancer) Len() int                  { return b.r.Len() }
func (b *ringBalancer) Done(*Target)              {}
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

// breaker returns p's breaker, making it on first use; nil without
// WithBreakers.
func (n *Node) breaker(p *peer) Breaker {
	f := n.remote.newBreaker
	if f == nil {
		return nil
	}
	if b := p.breaker.Load(); b != nil {
		return b.b
	}
	b := &breakerBox{f(&p.target)}
	if !p.breaker.CompareAndSwap(nil, b) {
		return p.breaker.Load().b
	}
	return b.b
}

type breakerBox struct{ b Breaker }

// retryBudget bounds the retries of calls that may have run (idempotent
// calls whose connection was lost): every remote call adds a tenth of a
// token, such a retry takes one whole token, and the bucket holds at most
// ten, so they stay within about 10% of calls plus a burst of ten. Calls
// refused by their target or never sent go to the next target without
// it: they cost their target nothing, and each target is tried once.
type retryBudget struct {
	milli atomic.Int64 // thousandths of a token
}

const (
	budgetDeposit = 100
	budgetCost    = 1000
	budgetCap     = 10 * budgetCost
)

func newRetryBudget() *retryBudget {
	b := new(retryBudget)
	b.milli.Store(budgetCap)
	return b
}

func (b *retryBudget) deposit() {
	if b.milli.Load() < budgetCap {
		b.milli.Add(budgetDeposit)
	}
}

// refund gives back a withdrawal that paid for no retry.
func (b *retryBudget) refund() { b.milli.Add(budgetCost) }

// withdraw takes the cost of one retry, or reports false.
func (b *retryBudget) withdraw() bool {
	for {
		v := b.milli.Load()
		if v < budgetCost {
			return false
		}
		if b.milli.CompareAndSwap(v, v-budgetCost) {
			return true
		}
	}
}
