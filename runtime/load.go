package runtime

import (
	"sync/atomic"
	"time"
)

// load is what a node knows of a peer's answers, for the default balancer
// (see [latencyBalancer]) and for [Target.InFlight] and [Target.Latency]:
// the calls in flight, a peak-weighted moving average of answer times,
// and when the peer last made progress.
type load struct {
	inFlight atomic.Int64
	rtt      atomic.Int64 // the average, in ns; 0 until the first answer
	rttAt    atomic.Int64 // clock reading of the last update of rtt
	progress atomic.Int64 // clock reading of the last answer, or of the call that found it idle
}

// Tuning of the average. A sample above it replaces it (peak), so that a
// peer turning slow is avoided at once; below, samples pull it down by
// rttWeight. Without samples it decays towards nothing with time constant
// rttDecay, so that a peer avoided for being slow is tried again: after a
// 50ms episode, within a few seconds. failPenalty is the sample a failed
// attempt counts as (lost connection, refusal, timeout), however long it
// took: a peer that stopped answering is avoided by the calls waiting on
// it (see latency), and such a sample would keep it avoided for long.
const (
	rttWeight   = 0.25
	rttDecay    = time.Second
	failPenalty = 250 * time.Millisecond
)

// epoch is the zero of [clock].
var epoch = time.Now()

// clock reads the monotonic clock, in ns since the process started.
func clock() int64 { return int64(time.Since(epoch)) }

// begin counts a call going out and returns the clock reading it starts at.
func (l *load) begin() int64 {
	now := clock()
	if l.inFlight.Add(1) == 1 {
		l.progress.Store(now) // idle until now: no call has been waiting
	}
	return now
}

// end counts the call begun at start as over; failed says the attempt
// failed for a reason that is the peer's (not an application error).
func (l *load) end(start int64, failed bool) {
	now := clock()
	l.inFlight.Add(-1)
	l.progress.Store(now)
	sample := now - start
	if failed {
		sample = int64(failPenalty)
	}
	old := l.decayed(now)
	next := sample
	if sample < old {
		next = old + int64(rttWeight*float64(sample-old))
	}
	l.rtt.Store(max(next, 1))
	l.rttAt.Store(now)
}

// decayed is the average at clock reading now.
func (l *load) decayed(now int64) int64 {
	rtt := l.rtt.Load()
	if rtt == 0 {
		return 0
	}
	age := now - l.rttAt.Load()
	if age <= 0 {
		return rtt
	}
	if age < int64(rttDecay/64) {
		return rtt // under 1.6% off: not worth the arithmetic
	}
	return int64(float64(rtt) * expNeg(float64(age)/float64(rttDecay)))
}

// expNeg approximates e^-x for x ≥ 0, never below it and within 0.3% up
// to x = 4 (3% at 8), at a fraction of math.Exp's cost: (e^-x/16)^16,
// e^-y by the reciprocal of its Taylor series to y³.
func expNeg(x float64) float64 {
	y := x / 16
	f := 1 / (1 + y*(1+y*(0.5+y/6)))
	f *= f
	f *= f
	f *= f
	return f * f
}

// reset forgets the average: a new connection to the peer starts afresh
// (what was learnt was of the connection that ended: a partition, a
// crash).
func (l *load) reset() {
	l.rtt.Store(0)
}

// latency is the answer time to expect of the peer at clock reading now:
// the average or, when calls wait on it, at least the time since it last
// answered (a peer that went silent looks slower with every moment).
// 0 means nothing is known yet.
func (l *load) latency(now int64) int64 {
	lat, _ := l.expect(now)
	return lat
}

// expect is the latency at clock reading now and whether the peer is
// stalled then, from one reading of the load.
func (l *load) expect(now int64) (latency int64, stalled bool) {
	rtt := l.decayed(now)
	if l.inFlight.Load() == 0 {
		return rtt, false
	}
	quiet := now - l.progress.Load()
	return max(rtt, quiet), quiet > max(stallFactor*rtt, int64(stallFloor))
}

// A peer is stalled when calls wait on it and it has answered none for
// stallFactor times its average answer time, and at least stallFloor: it
// loses any pick against one that is not, whatever the averages say (the
// other may have had one slow answer a moment ago).
const (
	stallFactor = 4
	stallFloor  = 5 * time.Millisecond
)

// InFlight reports the node's calls in flight to the target now.
func (t *Target) InFlight() int { return int(t.p.load.inFlight.Load()) }

// Latency reports the answer time the node expects of the target: a
// moving average of its answers that follows a slowdown at once and a
// recovery gradually, at least the time since its last answer while calls
// wait on it; failed attempts count as 250ms. 0 until the node
// has heard from the target.
func (t *Target) Latency() time.Duration { return time.Duration(t.p.load.latency(clock())) }
