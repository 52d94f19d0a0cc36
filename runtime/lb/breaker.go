package lb

import (
	"sync"

	"github.com/failsafe-go/failsafe-go/circuitbreaker"
)

// Breakers keeps one circuit breaker per target, keyed by K (a peer, an
// address). A target's breaker is made the first time it is asked for
// ([Breakers.Get], [Breakers.Skip]) and forgotten with [Breakers.Drop]
// when the target leaves. Breakers is safe for concurrent use.
//
// Each breaker is a failsafe-go circuit breaker. It is closed at first and
// lets every call through. After enough failures (see
// [WithFailureThreshold], [WithFailureRate]) it opens and refuses calls
// for a delay ([WithDelay]), jittered ([WithJitter]) so that breakers
// that opened together do not probe together. Then it is half-open: it
// lets a few trial calls through, one at a time by default, and closes
// once enough of them succeed ([WithSuccessThreshold]), or opens again.
// Time is read from the time package, so the breakers follow the fake
// clock of testing/synctest.
type Breakers[K comparable] struct {
	builder circuitbreaker.Builder[any]

	mu sync.RWMutex
	m  map[K]*Breaker
}

// NewBreakers returns an empty set of breakers configured by opts, or an
// error naming a bad option.
func NewBreakers[K comparable](opts ...BreakerOption) (*Breakers[K], error) {
	b, err := newBuilder(opts)
	if err != nil {
		return nil, err
	}
	return &Breakers[K]{builder: b, m: make(map[K]*Breaker)}, nil
}

// Get returns k's breaker, making it if k has none.
func (b *Breakers[K]) Get(k K) *Breaker {
	b.mu.RLock()
	br := b.m[k]
	b.mu.RUnlock()
	if br != nil {
		return br
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if br = b.m[k]; br == nil {
		br = &Breaker{cb: b.builder.Build()}
		br.drop = func() {
			b.mu.Lock()
			if b.m[k] == br {
				delete(b.m, k)
			}
			b.mu.Unlock()
		}
		b.m[k] = br
	}
	return br
}

// Skip reports whether k's breaker refuses a call now. It is meant as the
// skip function of [Balancer.Pick]: when it reports false, it has taken a
// permit for one call to k, which the caller must give back with
// [Breaker.Success] or [Breaker.Failure] (or end with [Breaker.Open]) when
// the call is over. See [Breaker.Allow].
func (b *Breakers[K]) Skip(k K) bool { return !b.Get(k).Allow() }

// IsOpen reports whether k's breaker is open and still within its delay.
// It takes no permit and makes no breaker: a target without one is not
// open.
func (b *Breakers[K]) IsOpen(k K) bool {
	b.mu.RLock()
	br := b.m[k]
	b.mu.RUnlock()
	return br != nil && br.IsOpen()
}

// Drop forgets k's breaker; a later Get starts a closed one.
func (b *Breakers[K]) Drop(k K) {
	b.mu.Lock()
	delete(b.m, k)
	b.mu.Unlock()
}

// Len reports the number of targets with a breaker.
func (b *Breakers[K]) Len() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.m)
}

// Breaker is the circuit breaker of one target. Its methods are safe for
// concurrent use and allocate nothing except when the state changes. A
// caller may keep the *Breaker of a target (in its peer, say) and skip
// the lookup of [Breakers.Get] on the hot path.
type Breaker struct {
	cb   circuitbreaker.CircuitBreaker[any]
	drop func() // forgets this breaker in its set
}

// Drop forgets this breaker in the [Breakers] that made it, as
// [Breakers.Drop] of its key does. A node calls it when the target leaves
// (see runtime.WithBreakers).
func (b *Breaker) Drop() {
	if b.drop != nil {
		b.drop()
	}
}

// Allow asks for a permit for one call and reports whether it got one. A
// closed breaker always grants one; an open breaker grants none until its
// delay is over, and then turns half-open; a half-open breaker grants as
// many as it has trial calls left. Every permit granted must be given back
// with [Breaker.Success] or [Breaker.Failure] (or ended with
// [Breaker.Open]), or a half-open breaker runs out of trials and stays
// half-open for good. A call that ends for a reason that says nothing of
// the target (the caller gave up) is best given back as a success.
func (b *Breaker) Allow() bool { return b.cb.TryAcquirePermit() }

// Success records a call that worked, giving back its permit.
func (b *Breaker) Success() { b.cb.RecordSuccess() }

// Failure records a call that failed because of the target (a transport
// error, a timeout, an overload answer), giving back its permit. Enough
// failures open the breaker.
func (b *Breaker) Failure() { b.cb.RecordFailure() }

// Open opens the breaker at once, whatever its state, for a new jittered
// delay: for a target that said it is over its load. It ends the permit
// of the call that learned it.
func (b *Breaker) Open() { b.cb.Open() }

// IsOpen reports whether the breaker is open and still within its delay,
// so that [Breaker.Allow] would refuse. It takes no permit. An open
// breaker whose delay is over is not reported open: the next Allow turns
// it half-open.
func (b *Breaker) IsOpen() bool { return b.cb.RemainingDelay() > 0 }

// State reports the breaker's state as failsafe-go records it. An open
// breaker stays [circuitbreaker.OpenState] after its delay until a call
// to [Breaker.Allow] turns it half-open.
func (b *Breaker) State() circuitbreaker.State { return b.cb.State() }
