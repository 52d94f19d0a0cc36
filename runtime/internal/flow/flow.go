// Package flow is the flow control of one side of a stream, as the wire
// defines it ([wire.InitialWindow], [wire.MessageCost]): the credit its
// sender holds, the queue its receiver keeps until the application takes
// a message, and the grants that give credit back. Both sides of a
// stream must count alike, so runtime/internal/mux and runtime/nats hold
// one Flow per stream, under the stream's own lock: a Flow has no lock.
//
// The sender holds credit, wire.InitialWindow at open, spends a
// message's cost (its size plus wire.MessageCost) on sending it and gets
// credit back from the receiver's grants. It may send a message when the
// message fits its credit, or when at least half the initial window is
// free, so that a message larger than the window still goes, alone:
// credit then goes negative until the receiver has taken it. The
// receiver keeps the same count (granted), checks every data frame
// against it, and grants what the application took once it reaches half
// its window. A receiver whose window is larger than the initial one
// grants the difference at open ([Flow.OpenGrant]); one whose window is
// the default grows it for a stream of large messages it keeps up with
// ([MaxGrown], [Budget]).
package flow

import (
	"sync/atomic"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// MaxGrown is the largest a stream's default window grows to, and
// Budget what the streams sharing a budget (a connection's, a caller's
// and node's) may grow their windows by, together: a receiver whose
// application keeps up with a stream of large messages (at least
// largeMessage bytes on average; nothing left queued at a grant) doubles
// its window at each grant while both allow, since on a fast link the
// window, not the reader, then holds the sender back (as HTTP/2's
// bandwidth-delay estimate grows gRPC's windows). Small messages never
// grow it: their cost is per message, and larger windows would only
// queue more of them.
const (
	MaxGrown = 4 << 20
	Budget   = 16 << 20

	largeMessage = 8 << 10
)

// Message is one received data payload, which the stream owns.
type Message struct {
	Codec   wire.Codec
	Payload []byte
}

// Flow is one side of a stream's flow control: its receive window and
// queue, and its send credit. The zero Flow is not ready: Init it.
type Flow struct {
	window int           // the receive window
	auto   bool          // window is the default, which grows
	budget *atomic.Int64 // what the windows sharing it grew by; nil: none grow

	q       []Message // received, not taken yet
	head    int       // q[head:] are the messages waiting
	qBytes  int       // payload bytes waiting in q
	granted int       // what the peer may still send, as this side counts it
	taken   int       // what was taken since the last grant
	tookN   int       // messages taken since the last grant
	grownBy int       // what window grew by, out of budget

	credit int // what this side may still send
}

// Init readies f with a receive window of window bytes (at least
// wire.InitialWindow), which grows when auto is set and budget is not
// nil.
func (f *Flow) Init(window int, auto bool, budget *atomic.Int64) {
	*f = Flow{window: window, auto: auto, budget: budget, granted: window, credit: wire.InitialWindow}
}

// Cost is what a message of n bytes costs in credit.
func Cost(n int) int { return n + wire.MessageCost }

// OpenGrant is what the receiver grants at open beyond the protocol's
// initial window: 0 when its window is the initial one.
func (f *Flow) OpenGrant() int { return max(f.window-wire.InitialWindow, 0) }

// Window is the receive window, as it grew.
func (f *Flow) Window() int { return f.window }

// Deliver queues a received data payload, which the stream now owns. It
// reports false, queueing nothing, when the payload exceeds the credit
// its peer was granted: a protocol error that ends the stream (as HTTP/2
// answers a FLOW_CONTROL_ERROR), so that a peer ignoring flow control
// costs no memory.
func (f *Flow) Deliver(codec wire.Codec, payload []byte) bool {
	n := Cost(len(payload))
	if n > f.granted && 2*f.granted < wire.InitialWindow {
		return false
	}
	f.granted -= n
	if f.head > 0 && f.head == len(f.q) {
		clear(f.q)
		f.q, f.head = f.q[:0], 0
	}
	f.q = append(f.q, Message{codec, payload})
	f.qBytes += len(payload)
	return true
}

// Waiting reports whether a received message waits to be taken.
func (f *Flow) Waiting() bool { return f.head < len(f.q) }

// Take takes the next waiting message (Waiting must hold) and returns
// what to grant the peer now: 0 until half the window is taken, or when
// mayGrant is false (the peer ended its side, or this side sends no more
// frames).
func (f *Flow) Take(mayGrant bool) (Message, int) {
	m := f.q[f.head]
	f.q[f.head] = Message{}
	f.head++
	f.qBytes -= len(m.Payload)
	f.taken += Cost(len(m.Payload))
	f.tookN++
	if !mayGrant || 2*f.taken < f.window {
		return m, 0
	}
	grant := f.taken + f.grow()
	f.taken, f.tookN = 0, 0
	f.granted += grant
	return m, grant
}

// grow doubles a default window whose application keeps up with large
// messages, within MaxGrown and the budget, and returns what it grew by.
func (f *Flow) grow() int {
	if !f.auto || f.budget == nil || f.Waiting() || f.tookN == 0 || f.taken/f.tookN < largeMessage {
		return 0
	}
	extra := min(f.window, MaxGrown-f.window)
	if extra <= 0 {
		return 0
	}
	if f.budget.Add(int64(extra)) > Budget {
		f.budget.Add(-int64(extra))
		return 0
	}
	f.window += extra
	f.grownBy += extra
	return extra
}

// Queued is the payload bytes received and not taken yet.
func (f *Flow) Queued() int { return f.qBytes }

// Spend takes the credit of a message of n bytes and reports true when
// the message may be sent now; false, taking nothing, when it must wait
// for credit.
func (f *Flow) Spend(n int) bool {
	c := Cost(n)
	if c > f.credit && 2*f.credit < wire.InitialWindow {
		return false
	}
	f.credit -= c
	return true
}

// AddCredit adds what the peer granted.
func (f *Flow) AddCredit(n uint32) { f.credit += int(n) }

// Release gives what the window grew by back to the budget, once the
// stream receives no more. It is idempotent.
func (f *Flow) Release() {
	if f.grownBy > 0 {
		f.budget.Add(-int64(f.grownBy))
		f.grownBy = 0
	}
}

// Drop releases the window's growth and forgets the queue: the stream
// ended at once.
func (f *Flow) Drop() {
	f.Release()
	clear(f.q)
	f.q, f.head, f.qBytes = nil, 0, 0
}
