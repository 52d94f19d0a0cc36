package gateway

import (
	"math"
	"sync"
	"time"
)

// limiter is a token bucket per key (a client's IP, a token's subject),
// in a table of at most maxKeys buckets: when it is full, buckets that
// have refilled (as good as new) are dropped, and if none has, an
// arbitrary one, so that a flood of keys costs bounded memory and never a
// refusal for a key seen for the first time.
type limiter struct {
	spec    rateSpec
	maxKeys int

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// defaultMaxKeys bounds a limiter's table.
const defaultMaxKeys = 100_000

// newLimiter returns the limiter of spec, or nil (no limit) for a zero
// rate.
func newLimiter(spec rateSpec, maxKeys int) *limiter {
	if spec.rate <= 0 {
		return nil
	}
	if spec.burst < 1 {
		spec.burst = max(1, int(math.Ceil(spec.rate)))
	}
	if maxKeys <= 0 {
		maxKeys = defaultMaxKeys
	}
	return &limiter{spec: spec, maxKeys: maxKeys, buckets: make(map[string]*bucket)}
}

// allow takes a token of key's bucket; without one it reports how long
// until the next. A nil limiter allows everything.
func (l *limiter) allow(key string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= l.maxKeys {
			l.evict(now)
		}
		b = &bucket{tokens: float64(l.spec.burst), last: now}
		l.buckets[key] = b
	}
	l.refill(b, now)
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / l.spec.rate * float64(time.Second))
	return false, wait
}

func (l *limiter) refill(b *bucket, now time.Time) {
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(float64(l.spec.burst), b.tokens+el.Seconds()*l.spec.rate)
		b.last = now
	}
}

// evict makes room for one bucket.
func (l *limiter) evict(now time.Time) {
	for k, b := range l.buckets {
		l.refill(b, now)
		if b.tokens >= float64(l.spec.burst) {
			delete(l.buckets, k)
		}
	}
	for k := range l.buckets {
		if len(l.buckets) < l.maxKeys {
			return
		}
		delete(l.buckets, k)
	}
}

// len returns how many buckets the table holds.
func (l *limiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// retrySeconds is a Retry-After for a wait: whole seconds, at least 1.
func retrySeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
