package runtime

import (
	"context"
	"encoding/binary"
	"hash/maphash"
	"sync"
	"time"
	"unsafe"

	"google.golang.org/protobuf/proto"
)

// dedupTable remembers a node's recent remote calls by caller and call id,
// so that a call sent again — refed on a new connection after its first
// connection dropped — joins the running call or receives the stored
// answer, and the handler runs once.
//
// It is bounded three ways: at most size answers are kept, none longer
// than ttl after it was given, and at most dedupMaxBytes of answers' bytes.
// Calls still running are not counted; they are bounded by the calls in
// flight.
//
// Every non-idempotent remote call passes through it, so the common path
// — a call seen once — touches little memory: running calls sit in a
// small map, answers are copied into a ring of slots whose buffers are
// reused (a large payload the node encoded for the answer is kept
// itself, not copied: see dedupShareMin), and the index from key to slot is a flat array of numbers that
// stays at most half full (see dedupIndex). A duplicate,
// which is rare, gets its own copy of the answer.
type dedupTable struct {
	ttl      time.Duration
	maxBytes int       // dedupMaxBytes, but for tests
	start    time.Time // slots keep their times as offsets from it

	mu      sync.Mutex
	running map[dedupKey]*dedupEntry // calls being served
	index   dedupIndex               // answered calls: their slot in ring
	ring    []dedupSlot              // answered calls, oldest at head
	head, n int
	bytes   int // answers' bytes held by the slots in use

	callers    map[callerKey]uint64 // callers, interned as numbers
	last       callerKey            // the caller interned last, and its number (0: none):
	lastNum    uint64               // a connection's calls come from one caller, in runs
	seed       maphash.Seed         // of the calls' digests
	nextCaller uint64
	free       []*dedupEntry // entries no duplicate ever saw, to reuse
}

// dedupKey names a call: the caller's interned number and its call id.
type dedupKey struct {
	caller uint64
	id     uint64
}

// callerKey is who a call's copies must come from: the identity the
// transport verified for the caller (its certificate's fingerprint, or
// none) and the token the caller sends this node.
type callerKey struct {
	identity [32]byte
	token    [tokenSize]byte
	verified bool // identity is set
}

// newCallerKey makes the key of a caller with transport identity id and
// token tok, or reports false when either is malformed: such a call is
// not de-duplicated.
func newCallerKey(id, tok string) (callerKey, bool) {
	var k callerKey
	if len(tok) != tokenSize || id != "" && len(id) != len(k.identity) {
		return k, false
	}
	copy(k.token[:], tok)
	if id != "" {
		copy(k.identity[:], id)
		k.verified = true
	}
	return k, true
}

// dedupSeen says what begin found of a call.
type dedupSeen uint8

const (
	dedupNew   dedupSeen = iota // not seen: serve it
	dedupCopy                   // the same call again: wait for its answer
	dedupOther                  // the caller's id with another pattern or payload
)

// deadKey marks a slot whose answer expired before its turn came.
var deadKey = dedupKey{caller: 0}

// dedupEntry is one running call, or the handle a duplicate holds.
type dedupEntry struct {
	key    dedupKey
	digest uint64        // of the call's pattern, overlay and payload
	done   chan struct{} // made by the first duplicate that waits; closed once answer is set
	answer *Message      // the answer's own copy, for duplicates
}

// dedupSlot is one answered call, its answer's bytes in buf: the error,
// then the payload, then the metadata's keys and values.
type dedupSlot struct {
	key    dedupKey
	digest uint64
	at     time.Duration // since the table's start, when it was answered
	code   Code
	codec  Codec
	flags  MessageFlags
	errLen uint32
	payLen uint32
	buf    []byte
	meta   []uint32 // the metadata's key and value lengths, in turn
	// shared, when set, is the answer's payload itself, kept rather than
	// copied into buf (see dedupShareMin); released when s is evicted.
	shared []byte
	// body, when set, is the answer's result not yet encoded (a
	// transport encodes it into its frame: see ServeMessageBody), of
	// bodyLen bytes; released when s is evicted.
	body    proto.Message
	bodyLen int
}

const (
	// maxInternedCallers bounds the interned caller ids; past it the
	// interning starts over with new numbers, so answers stored for the
	// callers known until then are not found again.
	maxInternedCallers = 1 << 16
	// dedupMaxBytes bounds the bytes of the answers a table keeps.
	dedupMaxBytes = 64 << 20
	// maxFreeEntries bounds the entries kept for reuse.
	maxFreeEntries = 1024
)

func newDedupTable(size int, ttl time.Duration) *dedupTable {
	return &dedupTable{
		ttl:      ttl,
		maxBytes: dedupMaxBytes,
		start:    time.Now(),
		running:  make(map[dedupKey]*dedupEntry),
		index:    newDedupIndex(size),
		ring:     make([]dedupSlot, size),
		callers:  make(map[callerKey]uint64),
		seed:     maphash.MakeSeed(),
	}
}

// digest sums what makes m the call it is: its pattern, the pattern
// overlaying it and its payload. A copy of a call has the same digest.
//
// The digest tells a copy of a call from another call under the same id,
// which only a caller that reuses its own ids sends (the runtime numbers
// its calls); it is no defence against anyone, a caller's copies being
// bound to its token and identity (see [callerKey]). So a payload up to
// digestWhole bytes is summed whole, and a larger one, which summing
// whole cost a sixth of a server's time with 1 MiB payloads, by its
// length, its first and last digestEdge bytes and digestSamples blocks of
// digestBlock bytes spread evenly between: another payload of the same
// length that differs only between the samples counts as a copy.
func (t *dedupTable) digest(m *Message) uint64 {
	// Three one-shot sums, mixed (cheaper than a streaming Hash, whose
	// buffer is copied and flushed).
	h := maphash.String(t.seed, m.Pattern)
	h = h*0x9e3779b97f4a7c15 ^ maphash.String(t.seed, metaValue(m.Meta, metaOver))
	h = h*0x9e3779b97f4a7c15 ^ t.payloadDigest(m.Payload) ^ uint64(m.Codec)
	return h
}

// The sampling of a large payload's digest (see [dedupTable.digest]).
const (
	digestWhole   = 16 << 10
	digestEdge    = 2 << 10
	digestBlock   = 64
	digestSamples = 128
)

// payloadDigest sums p: whole up to digestWhole bytes, else sampled.
func (t *dedupTable) payloadDigest(p []byte) uint64 {
	if len(p) <= digestWhole {
		return maphash.Bytes(t.seed, p)
	}
	var h maphash.Hash
	h.SetSeed(t.seed)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(p)))
	h.Write(n[:])
	h.Write(p[:digestEdge])
	mid := p[digestEdge : len(p)-digestEdge]
	stride := (len(mid) - digestBlock) / (digestSamples - 1)
	for i := range digestSamples {
		h.Write(mid[i*stride:][:digestBlock])
	}
	h.Write(p[len(p)-digestEdge:])
	return h.Sum64()
}

// begin registers the call id from caller, a call with digest. For a new
// call it returns the entry and dedupNew: the caller serves it and calls
// finish. For a copy of a call seen before it returns its entry and
// dedupCopy: wait for its answer. An id seen before with another digest is
// dedupOther.
func (t *dedupTable) begin(caller callerKey, id, digest uint64) (*dedupEntry, dedupSeen) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := dedupKey{t.intern(caller), id}
	if e := t.running[k]; e != nil {
		if e.digest != digest {
			return nil, dedupOther
		}
		if e.done == nil {
			e.done = make(chan struct{})
		}
		return e, dedupCopy
	}
	if i, ok := t.index.find(k, t.ring); ok {
		s := &t.ring[i]
		if time.Since(t.start)-s.at <= t.ttl {
			if s.digest != digest {
				return nil, dedupOther
			}
			return &dedupEntry{key: k, digest: digest, answer: s.answer()}, dedupCopy
		}
		// Expired, though not yet evicted: the slot no longer answers.
		t.index.remove(k, i)
		s.key = deadKey
	}
	var e *dedupEntry
	if n := len(t.free); n > 0 {
		e, t.free = t.free[n-1], t.free[:n-1]
		*e = dedupEntry{key: k, digest: digest}
	} else {
		e = &dedupEntry{key: k, digest: digest}
	}
	t.running[k] = e
	return e, dedupNew
}

// intern returns caller's number. Callers hold mu. The table of numbers
// is bounded in count, and so in bytes: its keys have a fixed size.
func (t *dedupTable) intern(caller callerKey) uint64 {
	if t.lastNum != 0 && caller == t.last {
		return t.lastNum // comparing the key is cheaper than hashing it
	}
	c, ok := t.callers[caller]
	if !ok {
		if len(t.callers) >= maxInternedCallers {
			clear(t.callers)
		}
		t.nextCaller++
		c = t.nextCaller
		t.callers[caller] = c
	}
	t.last, t.lastNum = caller, c
	return c
}

// finish records e's answer (never nil: calls without an answer are not
// de-duplicated) and hands it to the duplicates waiting. When keep is
// false (the call was refused without running) the call is forgotten, so
// that a later attempt runs it.
func (t *dedupTable) finish(e *dedupEntry, reply *Message, keep bool) {
	now := time.Since(t.start)
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.running, e.key)
	if e.done != nil {
		var s dedupSlot
		s.set(e.key, e.digest, 0, reply, messageBytes(reply))
		e.answer = s.answer()
		close(e.done)
	} else if len(t.free) < maxFreeEntries {
		t.free = append(t.free, e) // no duplicate holds it
	}
	if !keep || len(t.ring) == 0 {
		return
	}
	size := messageBytes(reply)
	for t.n > 0 && (t.n == len(t.ring) || t.bytes+size > t.maxBytes) {
		t.evictOldest()
	}
	i := (t.head + t.n) % len(t.ring)
	t.ring[i].set(e.key, e.digest, now, reply, size)
	t.index.insert(e.key, i)
	t.n++
	t.bytes += size
	t.expire(now)
}

// expire drops the answers older than the table's ttl. Callers hold mu.
func (t *dedupTable) expire(now time.Duration) {
	for t.n > 0 && now-t.ring[t.head].at > t.ttl {
		t.evictOldest()
	}
}

func (t *dedupTable) evictOldest() {
	s := &t.ring[t.head]
	if s.key != deadKey {
		t.index.remove(s.key, t.head)
	}
	t.bytes -= s.bytes()
	s.key, s.shared, s.body = deadKey, nil, nil
	t.head = (t.head + 1) % len(t.ring)
	t.n--
}

// len returns the number of calls the table knows, running or answered.
func (t *dedupTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.running) + t.index.n
}

// wait returns e's answer once it has one, or ctx's error.
func (t *dedupTable) wait(ctx context.Context, e *dedupEntry) (*Message, error) {
	t.mu.Lock()
	done, answer := e.done, e.answer
	t.mu.Unlock()
	if answer != nil {
		return answer, nil
	}
	select {
	case <-done: // closed after answer was set
		return e.answer, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// set copies m into s, reusing s's buffers: a reply may alias the buffer
// of the request's frame, which the transport reuses. A large payload the
// node encoded for m alone is kept as it is (see sharedPayload).
func (s *dedupSlot) set(k dedupKey, digest uint64, at time.Duration, m *Message, size int) {
	s.key, s.digest, s.at = k, digest, at
	s.code, s.codec, s.flags = m.Code, m.Codec, m.Flags
	s.errLen, s.payLen = uint32(len(m.Error)), uint32(len(m.Payload))
	s.shared = sharedPayload(m)
	if s.shared != nil {
		size -= len(s.shared)
	}
	s.body, s.bodyLen = m.body, m.bodyLen
	size -= m.bodyLen
	if cap(s.buf) < size || cap(s.buf) > 4*size+512 {
		s.buf = make([]byte, 0, size) // grown, or shrunk after a large answer
	}
	buf := append(s.buf[:0], m.Error...)
	if s.shared == nil {
		buf = append(buf, m.Payload...)
	}
	meta := s.meta[:0]
	for _, p := range m.Meta {
		buf = append(append(buf, p.Key...), p.Value...)
		meta = append(meta, uint32(len(p.Key)), uint32(len(p.Value)))
	}
	s.buf, s.meta = buf, meta
}

// bytes is the size of the answer s holds.
func (s *dedupSlot) bytes() int { return len(s.buf) + len(s.shared) + s.bodyLen }

// answer returns a copy of s's answer, which shares no memory with s but
// its shared payload, which no one changes.
func (s *dedupSlot) answer() *Message {
	buf := append([]byte(nil), s.buf...)
	str := func(n uint32) string {
		if n == 0 {
			return ""
		}
		v := unsafe.String(&buf[0], n)
		buf = buf[n:]
		return v
	}
	m := &Message{Code: s.code, Codec: s.codec, Flags: s.flags, Error: str(s.errLen)}
	m.body, m.bodyLen = s.body, s.bodyLen
	if s.shared != nil {
		m.Payload, m.owned = s.shared, true
	} else if s.payLen > 0 {
		m.Payload, buf = buf[:s.payLen:s.payLen], buf[s.payLen:]
	}
	if len(s.meta) > 0 {
		m.Meta = make([]MetaPair, len(s.meta)/2)
		for i := range m.Meta {
			m.Meta[i] = MetaPair{str(s.meta[2*i]), str(s.meta[2*i+1])}
		}
	}
	return m
}

// messageBytes is the size of m's payload, error and metadata.
func messageBytes(m *Message) int {
	size := len(m.Payload) + len(m.Error) + m.bodyLen
	for _, p := range m.Meta {
		size += len(p.Key) + len(p.Value)
	}
	return size
}

// dedupIndex maps the keys of answered calls to their slots in the ring:
// open addressing with linear probing and backward-shift deletion, so no
// tombstones build up as the ring turns over, and at most half full, so a
// key that is not there — every call's first attempt — is told apart
// within a probe or two. A cell holds the low 32 bits of the key's hash
// (whose low bits are its home cell) above the slot number plus one; zero
// is empty.
type dedupIndex struct {
	cells []uint64
	mask  uint64
	n     int
}

func newDedupIndex(slots int) dedupIndex {
	size := 16
	for size < 2*slots {
		size <<= 1
	}
	return dedupIndex{cells: make([]uint64, size), mask: uint64(size - 1)}
}

// dedupHash mixes a key's two numbers (a splitmix64 finaliser): call ids
// from one caller are consecutive.
func dedupHash(k dedupKey) uint32 {
	h := k.id ^ k.caller*0x9e3779b97f4a7c15
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return uint32(h)
}

// find returns the slot of k, checked against the ring's keys.
func (x *dedupIndex) find(k dedupKey, ring []dedupSlot) (int, bool) {
	h := dedupHash(k)
	for i := uint64(h) & x.mask; ; i = (i + 1) & x.mask {
		c := x.cells[i]
		if c == 0 {
			return 0, false
		}
		if uint32(c>>32) == h {
			if s := int(uint32(c)) - 1; ring[s].key == k {
				return s, true
			}
		}
	}
}

// insert adds k at slot; k is not in the index.
func (x *dedupIndex) insert(k dedupKey, slot int) {
	h := dedupHash(k)
	i := uint64(h) & x.mask
	for x.cells[i] != 0 {
		i = (i + 1) & x.mask
	}
	x.cells[i] = uint64(h)<<32 | uint64(slot+1)
	x.n++
}

// remove drops k, which is at slot, and moves later cells of its run back
// into the hole where their home cell allows.
func (x *dedupIndex) remove(k dedupKey, slot int) {
	h := dedupHash(k)
	want := uint64(h)<<32 | uint64(slot+1)
	i := uint64(h) & x.mask
	for x.cells[i] != want {
		if x.cells[i] == 0 {
			return // not there
		}
		i = (i + 1) & x.mask
	}
	x.n--
	for j := (i + 1) & x.mask; ; j = (j + 1) & x.mask {
		c := x.cells[j]
		if c == 0 {
			break
		}
		// c may fill the hole at i if its home cell is not after i on
		// the way to j.
		if home := (c >> 32) & x.mask; (j-home)&x.mask >= (j-i)&x.mask {
			x.cells[i] = c
			i = j
		}
	}
	x.cells[i] = 0
}
