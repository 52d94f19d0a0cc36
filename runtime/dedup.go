package runtime

import (
	"context"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// dedupTable remembers a node's recent remote calls by caller and call id,
// so that a call sent again — refed on a new connection after its first
// connection dropped — joins the running call or receives the stored
// answer, and the handler runs once.
//
// It is bounded twice: at most size answers are kept, and none longer than
// ttl after it was given. Calls still running are not counted; they are
// bounded by the calls in flight.
type dedupTable struct {
	ttl time.Duration

	mu      sync.Mutex
	m       map[dedupKey]*dedupEntry
	ring    []*dedupEntry // answered calls, oldest at head
	head, n int
	callers map[string]string // interned caller ids
}

type dedupKey struct {
	caller string
	id     uint64
}

// dedupEntry is one call: running until answered.
type dedupEntry struct {
	key      dedupKey
	answered bool          // guarded by the table's mu; stored is set before it
	done     chan struct{} // made by the first duplicate that waits
	at       time.Time     // when it was answered

	// stored is the entry's own copy of the answer; its strings and
	// payload live in one buffer, and meta holds up to two pairs.
	stored Message
	meta   [2]MetaPair
}

// maxInternedCallers bounds the interned caller ids; past it the interning
// starts over (entries keep their own copies).
const maxInternedCallers = 1 << 16

func newDedupTable(size int, ttl time.Duration) *dedupTable {
	return &dedupTable{
		ttl:     ttl,
		m:       make(map[dedupKey]*dedupEntry),
		ring:    make([]*dedupEntry, size),
		callers: make(map[string]string),
	}
}

// begin registers the call id from caller. For a new call it returns the
// entry and false: the caller serves it and calls finish. For a call seen
// before it returns its entry and true: wait for its answer.
func (t *dedupTable) begin(caller string, id uint64) (*dedupEntry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expire(time.Now())
	c, ok := t.callers[caller] // the lookup does not copy caller
	if !ok {
		if len(t.callers) >= maxInternedCallers {
			clear(t.callers)
		}
		c = strings.Clone(caller) // caller may alias a frame's buffer
		t.callers[c] = c
	}
	k := dedupKey{c, id}
	if e := t.m[k]; e != nil {
		if !e.answered && e.done == nil {
			e.done = make(chan struct{})
		}
		return e, true
	}
	e := &dedupEntry{key: k}
	t.m[k] = e
	return e, false
}

// finish records e's answer (never nil: calls without an answer are not
// de-duplicated) and hands it to the duplicates waiting. When keep is
// false (the call was refused without running) the call is forgotten, so
// that a later attempt runs it.
func (t *dedupTable) finish(e *dedupEntry, reply *Message, keep bool) {
	e.store(reply) // no duplicate reads it before answered is set
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e.answered, e.at = true, now
	if e.done != nil {
		close(e.done)
	}
	if !keep || len(t.ring) == 0 {
		delete(t.m, e.key)
		return
	}
	if t.n == len(t.ring) {
		t.evictOldest()
	}
	t.ring[(t.head+t.n)%len(t.ring)] = e
	t.n++
	t.expire(now)
}

// expire drops the answers older than the table's ttl. Callers hold mu.
func (t *dedupTable) expire(now time.Time) {
	for t.n > 0 && now.Sub(t.ring[t.head].at) > t.ttl {
		t.evictOldest()
	}
}

func (t *dedupTable) evictOldest() {
	e := t.ring[t.head]
	t.ring[t.head] = nil
	t.head = (t.head + 1) % len(t.ring)
	t.n--
	if t.m[e.key] == e {
		delete(t.m, e.key)
	}
}

// len returns the number of calls the table knows, running or answered.
func (t *dedupTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// wait returns e's answer once it has one, or ctx's error.
func (t *dedupTable) wait(ctx context.Context, e *dedupEntry) (*Message, error) {
	t.mu.Lock()
	done, answered := e.done, e.answered
	t.mu.Unlock()
	if !answered {
		select {
		case <-done: // closed after answered was set
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &e.stored, nil
}

// store copies reply into e: a reply may alias the buffer of the
// request's frame, which the transport reuses. The copy takes one
// allocation: payload, error and metadata share one buffer.
func (e *dedupEntry) store(m *Message) {
	size := len(m.Payload) + len(m.Error)
	for _, p := range m.Meta {
		size += len(p.Key) + len(p.Value)
	}
	buf := make([]byte, 0, size)
	take := func(s string) string {
		if s == "" {
			return ""
		}
		start := len(buf)
		buf = append(buf, s...)
		return unsafe.String(&buf[start], len(s)) // buf never changes once written
	}
	e.stored = Message{Code: m.Code, Codec: m.Codec, Flags: m.Flags, Error: take(m.Error)}
	if len(m.Payload) > 0 {
		start := len(buf)
		buf = append(buf, m.Payload...)
		e.stored.Payload = buf[start:len(buf):len(buf)]
	}
	if len(m.Meta) > 0 {
		meta := e.meta[:0]
		if len(m.Meta) > len(e.meta) {
			meta = make([]MetaPair, 0, len(m.Meta))
		}
		for _, p := range m.Meta {
			meta = append(meta, MetaPair{take(p.Key), take(p.Value)})
		}
		e.stored.Meta = meta
	}
}
