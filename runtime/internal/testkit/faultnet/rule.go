//go:build linux

package faultnet

import (
	"cmp"
	"math/rand/v2"
	"time"
)

// Rule is what the hub does to the packets of one direction, from one
// host to another. The zero Rule forwards every packet at once.
type Rule struct {
	// Drop drops every packet: a partition of this direction.
	Drop bool
	// Loss is the probability that a packet is dropped, 0 to 1.
	Loss float64
	// Delay holds each packet this long before forwarding it, plus or
	// minus a uniformly random Jitter (never below zero). Jitter reorders
	// packets whose gaps are shorter than it, as netem's does.
	Delay, Jitter time.Duration
	// Reorder is the probability that a packet is held back by ReorderBy
	// (10 ms when zero) on top of its delay, so that packets sent after
	// it overtake it.
	Reorder   float64
	ReorderBy time.Duration
}

// defaultReorderBy is how long a reordered packet is held back when
// Rule.ReorderBy is zero.
const defaultReorderBy = 10 * time.Millisecond

// verdict decides a packet's fate under r: drop it, or forward it after
// the returned delay.
func (r Rule) verdict(rng *rand.Rand) (drop bool, delay time.Duration) {
	if r.Drop || (r.Loss > 0 && rng.Float64() < r.Loss) {
		return true, 0
	}
	delay = r.Delay
	if r.Jitter > 0 {
		delay += time.Duration(rng.Int64N(int64(2*r.Jitter)+1)) - r.Jitter
	}
	if r.Reorder > 0 && rng.Float64() < r.Reorder {
		delay += cmp.Or(r.ReorderBy, defaultReorderBy)
	}
	return false, max(delay, 0)
}

// Counts are the packets of one direction so far.
type Counts struct {
	Forwarded, Dropped uint64
}
