package runtime

import (
	"slices"
	"time"
)

// The de-duplication table keeps answers within a bound on bytes, so that
// other callers' large answers can drop a caller's answer long before its
// time. The caller may still send that call again (its connection was out
// while the answers piled up): the table must know that it ran. So when
// a generation of answers is dropped for room, the calls in it whose
// answers had not yet expired leave their ids behind: a record of fixed
// size per call (dedupRan), kept by caller, until the answer's time
// (the table's ttl) is up. A copy of such a call gets [ErrAnswerDropped]
// and does not run again.
//
// The records are bounded in number, node-wide (dedupMaxRan); past the
// bound the caller holding the most loses its oldest, so that one caller's
// traffic cannot drop another's few. A generation dropped for its age
// leaves nothing: its answers had expired.

// dedupRan is a call the node ran whose answer it dropped for room.
type dedupRan struct {
	id     uint64
	digest uint64
	at     time.Duration // when it was answered, since the table's start
}

const (
	// dedupMaxRan bounds the records of calls whose answers were
	// dropped for room, across callers.
	dedupMaxRan = 1 << 20
	// dedupRanEvict is the share of the largest caller's records
	// dropped at once when the bound is reached.
	dedupRanEvict = 4
)

// keepRan records the calls of g, a generation dropped for room, whose
// answers had not expired at now. Callers hold mu.
func (t *dedupTable) keepRan(g *dedupGen, now time.Duration) {
	var c *dedupCaller
	for i := range g.n {
		s := &g.slots[i>>dedupSlotBits][i&(1<<dedupSlotBits-1)]
		if now-s.at > t.ttl {
			continue
		}
		if c == nil || c.num != s.key.caller {
			if c = t.byNum[s.key.caller]; c == nil {
				continue // forgotten by the interning: its calls are new to it
			}
		}
		c.addRan(dedupRan{id: s.key.id, digest: s.digest, at: s.at})
		t.ranN++
	}
	for t.ranN > t.maxRan {
		t.dropRan()
	}
}

// addRan adds r to c's records, which stay sorted by id: a node numbers
// its calls in turn, so r belongs at the end or near it.
func (c *dedupCaller) addRan(r dedupRan) {
	i := len(c.ran)
	for i > c.ranHead && c.ran[i-1].id > r.id {
		i--
	}
	c.ran = slices.Insert(c.ran, i, r)
}

// findRan returns c's record of id, dropping the records expired at now
// from the front first (they are near enough in the order of their
// times).
func (t *dedupTable) findRan(c *dedupCaller, id uint64, now time.Duration) (dedupRan, bool) {
	for c.ranHead < len(c.ran) && now-c.ran[c.ranHead].at > t.ttl {
		c.ranHead++
		t.ranN--
	}
	c.compactRan()
	live := c.ran[c.ranHead:]
	if len(live) == 0 || id < live[0].id || id > live[len(live)-1].id {
		return dedupRan{}, false
	}
	i, ok := slices.BinarySearchFunc(live, id, func(r dedupRan, id uint64) int {
		switch {
		case r.id < id:
			return -1
		case r.id > id:
			return 1
		}
		return 0
	})
	if !ok || now-live[i].at > t.ttl {
		return dedupRan{}, false
	}
	return live[i], true
}

// compactRan moves c's live records to the front of its array once the
// dropped ones are half of it, and gives an empty array back.
func (c *dedupCaller) compactRan() {
	switch {
	case c.ranHead == len(c.ran):
		c.ran, c.ranHead = nil, 0
	case c.ranHead > len(c.ran)/2:
		n := copy(c.ran, c.ran[c.ranHead:])
		c.ran, c.ranHead = c.ran[:n], 0
	}
}

// dropRan drops the oldest records of the caller holding the most.
// Callers hold mu.
func (t *dedupTable) dropRan() {
	var big *dedupCaller
	for _, c := range t.byNum {
		if big == nil || len(c.ran)-c.ranHead > len(big.ran)-big.ranHead {
			big = c
		}
	}
	n := max((len(big.ran)-big.ranHead)/dedupRanEvict, 1)
	big.ranHead += n
	t.ranN -= n
	big.compactRan()
}

// forgetRan drops c's records, when the interning forgets c.
func (t *dedupTable) forgetRan(c *dedupCaller) {
	t.ranN -= len(c.ran) - c.ranHead
	c.ran, c.ranHead = nil, 0
}
