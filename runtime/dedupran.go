package runtime

import (
	"sort"
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
			t.ranN -= c.ran.expire(now, t.ttl)
		}
		c.ran.add(dedupRan{id: s.key.id, digest: s.digest, at: s.at})
		t.ranN++
	}
	for t.ranN > t.maxRan {
		t.dropRan()
	}
}

// findRan returns c's record of id, if it has one that has not expired.
// Callers hold mu.
func (t *dedupTable) findRan(c *dedupCaller, id uint64) (dedupRan, bool) {
	if !c.ran.spans(id) {
		return dedupRan{}, false // the common path: a new call, above them all
	}
	now := time.Since(t.start)
	t.ranN -= c.ran.expire(now, t.ttl)
	r, ok := c.ran.find(id)
	if !ok || now-r.at > t.ttl {
		return dedupRan{}, false
	}
	return r, true
}

// dropRan drops the oldest records of the caller holding the most.
// Callers hold mu.
func (t *dedupTable) dropRan() {
	var big *dedupCaller
	for _, c := range t.byNum {
		if big == nil || c.ran.n > big.ran.n {
			big = c
		}
	}
	n := max(big.ran.n/dedupRanEvict, 1)
	big.ran.drop(n)
	t.ranN -= n
}

// forgetRan drops c's records, when the interning forgets c.
func (t *dedupTable) forgetRan(c *dedupCaller) {
	t.ranN -= c.ran.n
	c.ran = ranRing{}
}

// ranRing is a caller's records, sorted by id, oldest first: a ring that
// doubles when full, so that dropping the oldest moves nothing.
type ranRing struct {
	buf  []dedupRan // len is a power of two, or zero
	head int        // buf index of the first record
	n    int
}

// at returns the i-th record.
func (q *ranRing) at(i int) *dedupRan { return &q.buf[(q.head+i)&(len(q.buf)-1)] }

// add adds r in id order: a node numbers its calls in turn, so r belongs
// at the end or near it.
func (q *ranRing) add(r dedupRan) {
	if q.n == len(q.buf) {
		buf := make([]dedupRan, max(2*len(q.buf), 64))
		for i := range q.n {
			buf[i] = *q.at(i)
		}
		q.buf, q.head = buf, 0
	}
	i := q.n
	for ; i > 0 && q.at(i-1).id > r.id; i-- {
		*q.at(i) = *q.at(i - 1)
	}
	*q.at(i) = r
	q.n++
}

// spans reports whether id is within the ids of q's records.
func (q *ranRing) spans(id uint64) bool {
	return q.n > 0 && id >= q.at(0).id && id <= q.at(q.n-1).id
}

// find returns the record of id.
func (q *ranRing) find(id uint64) (dedupRan, bool) {
	i := sort.Search(q.n, func(i int) bool { return q.at(i).id >= id })
	if i < q.n && q.at(i).id == id {
		return *q.at(i), true
	}
	return dedupRan{}, false
}

// expire drops the records from the front whose time is up at now (the
// records are near enough in the order of their times) and returns how
// many.
func (q *ranRing) expire(now, ttl time.Duration) int {
	n := 0
	for n < q.n && now-q.at(n).at > ttl {
		n++
	}
	q.drop(n)
	return n
}

// drop drops the n oldest records; an emptied ring gives its array back.
func (q *ranRing) drop(n int) {
	q.head = (q.head + n) & (len(q.buf) - 1)
	q.n -= n
	if q.n == 0 {
		*q = ranRing{}
	}
}
