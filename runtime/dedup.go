package runtime

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"
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

// dedupEntry is one call: running until reply is set.
type dedupEntry struct {
	key   dedupKey
	reply *Message      // guarded by the table's mu; a private copy
	done  chan struct{} // made by the first duplicate that waits
	at    time.Time     // when it was answered
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
		if e.reply == nil && e.done == nil {
			e.done = make(chan struct{})
		}
		return e, true
	}
	e := &dedupEntry{key: k}
	t.m[k] = e
	return e, false
}

// finish records e's answer and hands it to the duplicates waiting. When
// keep is false (the call was refused without running) the call is
// forgotten, so that a later attempt runs it.
func (t *dedupTable) finish(e *dedupEntry, reply *Message, keep bool) {
	r := cloneReply(reply)
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e.reply, e.at = r, now
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

// wait returns e's answer once it has one, or ctx's error. A nil answer
// means the call wanted none.
func (t *dedupTable) wait(ctx context.Context, e *dedupEntry) (*Message, error) {
	t.mu.Lock()
	r, done := e.reply, e.done
	t.mu.Unlock()
	if done == nil { // answered before begin returned
		return r, nil
	}
	select {
	case <-done:
		t.mu.Lock()
		defer t.mu.Unlock()
		return e.reply, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// cloneReply copies a reply so that the table owns it: a reply may alias
// the buffer of the request's frame, which the transport reuses.
func cloneReply(m *Message) *Message {
	if m == nil {
		return nil
	}
	c := &Message{Code: m.Code, Codec: m.Codec, Flags: m.Flags, Error: strings.Clone(m.Error)}
	if len(m.Payload) > 0 {
		c.Payload = slices.Clone(m.Payload)
	}
	if len(m.Meta) > 0 {
		c.Meta = make([]MetaPair, len(m.Meta))
		for i, p := range m.Meta {
			c.Meta[i] = MetaPair{strings.Clone(p.Key), strings.Clone(p.Value)}
		}
	}
	return c
}
