package swim

import (
	"math"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// Preset is a set of gossip timings. [LAN] is the default; [Fast] suits
// tests and nodes sharing one host. [WithMemberlistConfig] can change any
// timing a preset sets.
type Preset int

const (
	// LAN uses memberlist.DefaultLANConfig's timings: a probe every
	// second (500 ms ack timeout), gossip every 200 ms to 3 members, a
	// full state sync every 30 s, suspicion multiplier 4 (4 s with up to
	// 10 members), 10 s stream timeout, dead members gossiped to for 30 s.
	// Joining retries from 500 ms up to 30 s apart. Reconnects to failed
	// members every 10 s (backing off to 30 s) for 24 h after their death,
	// and re-joins the seeds that are not members every 30 s (see
	// [WithReconnect]). Unlike memberlist's default, gossip is not
	// compressed (see [Preset]'s apply).
	LAN Preset = iota

	// Fast is for tests and single hosts, where round trips take
	// microseconds: a probe every 100 ms (50 ms ack timeout), gossip every
	// 20 ms to 4 members, a full state sync every 3 s, suspicion
	// multiplier 3 (300 ms with up to 10 members, about 510 ms with 50),
	// a 500 ms stream timeout, dead members gossiped to for 3 s. Joining
	// retries from 50 ms up to 1 s apart. Reconnects to failed members
	// every second (backing off to 3 s) for 10 minutes after their death,
	// and re-joins the seeds that are not members every 3 s. On a real
	// network its short timeouts would declare healthy members dead.
	Fast
)

// String returns the preset's name.
func (p Preset) String() string {
	switch p {
	case LAN:
		return "LAN"
	case Fast:
		return "Fast"
	}
	return "Preset(" + strconv.Itoa(int(p)) + ")"
}

func (p Preset) valid() bool { return p == LAN || p == Fast }

// apply sets p's timings on c, which starts as memberlist.DefaultLANConfig.
//
// Both presets turn memberlist's LZW compression of gossip off: a new
// compressor per message made it the largest share of memberlist's CPU
// and of the heap growth of a member while its mesh changed, for about
// the same bytes at rest (docs/kubernetes.md has the paired runs).
// Members with and without it understand each other: memberlist decodes
// a compressed message whatever its own setting. [WithMemberlistConfig]
// turns it back on.
func (p Preset) apply(c *memberlist.Config) {
	c.EnableCompression = false
	if p != Fast {
		return
	}
	c.ProbeInterval = 100 * time.Millisecond
	c.ProbeTimeout = 80 * time.Millisecond
	c.GossipInterval = 20 * time.Millisecond
	c.GossipNodes = 4
	c.SuspicionMult = 4
	c.SuspicionMaxTimeoutMult = 3
	c.PushPullInterval = 3 * time.Second
	c.GossipToTheDeadTime = 3 * time.Second
	c.TCPTimeout = 500 * time.Millisecond
}

// reconnect is the interval between attempts to reconnect to failed
// members, and how long after its death a member is tried.
func (p Preset) reconnect() (interval, timeout time.Duration) {
	if p == Fast {
		return time.Second, 10 * time.Minute
	}
	return 10 * time.Second, 24 * time.Hour
}

// joinBackoff is the first and the longest wait between join attempts.
func (p Preset) joinBackoff() (first, max time.Duration) {
	if p == Fast {
		return 50 * time.Millisecond, time.Second
	}
	return 500 * time.Millisecond, 30 * time.Second
}

// SuspicionTimeout is how long a member of a cluster of n stays suspect
// before the others declare it dead, with p's timings:
//
//	SuspicionMult × max(1, log10(n)) × ProbeInterval
//
// ([LAN]: 4 × max(1, log10 n) × 1 s; [Fast]: 4 × max(1, log10 n) × 100 ms.)
// This is the nominal timeout, reached once SuspicionMult−2 other members
// confirm the suspicion; without confirmations it is up to
// SuspicionMaxTimeoutMult times longer ([LAN] 6, [Fast] 3). Failure
// detection adds the time until some member probes the dead one (about
// one probe interval) and the probe itself; removal from routing adds
// the gossip of the death, a few gossip intervals.
func (p Preset) SuspicionTimeout(n int) time.Duration {
	c := memberlist.DefaultLANConfig()
	p.apply(c)
	return suspicionTimeout(c, n)
}

// suspicionTimeout is memberlist's formula for c's timings.
func suspicionTimeout(c *memberlist.Config, n int) time.Duration {
	scale := math.Max(1, math.Log10(math.Max(1, float64(n))))
	return time.Duration(float64(c.SuspicionMult) * scale * float64(c.ProbeInterval))
}
