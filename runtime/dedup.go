package runtime

import (
	"context"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
)

// dedupTable remembers a node's recent remote calls by caller and call id,
// so that a call sent again — refed on a new connection after its first
// connection dropped — joins the running call or receives the stored
// answer, and the handler runs once.
//
// It is bounded by time and bytes: an answer is given for ttl after it
// was given first, and the answers kept take at most maxBytes, each
// counted with its bookkeeping (dedupAnswerCost). A count of answers
// would bound the time an answer is kept by the node's rate of calls
// (16,384 answers turn over in 80 ms at 200,000 calls a second, well
// within the time a caller takes to send a call again), so none is kept
// unless asked for (WithDedup's size). Calls still running are not
// counted; they are bounded by the calls in flight.
//
// Answers are kept in two generations, the current one and the one
// before, and dropped a generation at a time: when the current one is
// older than ttl (all of the one before has expired then), or when it
// would pass half the bound on bytes or on count (so the newest half
// stays). Dropping one clears its arrays and reuses them (or, dropped
// for its age, gives them back: see rotate), so no answer is evicted one
// by one. Each
// generation has a flat index from key to answer that stays at most half
// full, pointer-free slots and an arena of the answers' bytes, both in
// chunks that are filled in turn and reused, never copied to grow; the
// garbage collector scans none of them. Only a large answer is kept by
// reference (see dedupShareMin): its payload or its unencoded result; a
// small unencoded result is encoded into the arena. A running call sits in the same index, in the generation it
// began in, so a call seen once — the common path — touches one index
// run, appends one slot and copies its answer once into the arena.
type dedupTable struct {
	ttl      time.Duration
	maxBytes int       // dedupMaxBytes unless WithDedupBytes says otherwise
	maxRan   int       // dedupMaxRan, but for tests
	genMax   int       // the answers a generation holds at most; 0: any number
	start    time.Time // answers keep their times as offsets from it

	mu     sync.Mutex
	gens   [2]dedupGen // gens[cur] takes the new answers
	cur    int
	serial uint32 // gens[cur]'s, counting the generations started
	bytes  int    // charged by both generations' answers

	running  []*dedupEntry // running calls by their number (runRef)
	freeRuns []uint32      // numbers of running calls free for reuse

	callers    map[callerKey]*dedupCaller // callers, interned as numbers
	byNum      map[uint64]*dedupCaller    // the same callers by their numbers
	ranN       int                        // the callers' records of calls run (dedupran.go)
	last       callerKey                  // the caller interned last (when lastCaller is set):
	lastCaller *dedupCaller               // a connection's calls come from one caller, in runs
	seed       maphash.Seed               // of the calls' digests
	nextCaller uint64
	free       []*dedupEntry // entries no duplicate ever saw, to reuse

	// The sweep drops both generations once the last answer stored is
	// older than ttl, so that a node that goes quiet after a burst does
	// not hold the answers' memory until calls come again.
	lastAt   time.Duration // when the last answer was stored
	sweep    *time.Timer   // runs sweepIdle; made by the first answer stored
	sweeping bool          // sweep is armed
	stopped  bool          // stop was called: no sweep is armed again
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

// dedupCaller is an interned caller: its number, and the highest call id
// of its that each generation's index has held. A node numbers its calls
// in turn, so a call above that is not in the generation: a first
// attempt, the common path, looks up nothing.
type dedupCaller struct {
	num    uint64
	top    [2]uint64 // by generation: the highest id in gens[i]
	serial [2]uint32 // the serial of gens[i] that top[i] is for

	ran ranRing // calls run whose answers were dropped for room (dedupran.go)
}

// saw records that id went into gens[i], of serial.
func (c *dedupCaller) saw(i int, serial uint32, id uint64) {
	if c.serial[i] != serial {
		c.serial[i], c.top[i] = serial, id
	} else {
		c.top[i] = max(c.top[i], id)
	}
}

// mayHold reports whether gens[i], of serial, may hold id.
func (c *dedupCaller) mayHold(i int, serial uint32, id uint64) bool {
	return c.serial[i] == serial && id <= c.top[i]
}

// dedupSeen says what begin found of a call.
type dedupSeen uint8

const (
	dedupNew   dedupSeen = iota // not seen: serve it
	dedupCopy                   // the same call again: wait for its answer
	dedupOther                  // the caller's id with another pattern or payload
	dedupGone                   // the same call again, run, its answer dropped for room
)

// dedupEntry is one running call, or the handle a duplicate holds.
type dedupEntry struct {
	key    dedupKey
	digest uint64        // of the call's pattern, overlay and payload
	done   chan struct{} // made by the first duplicate that waits; closed once answer is set
	answer *Message      // the answer's own copy, for duplicates
	caller *dedupCaller
	hash   uint32 // dedupHash(key)
	run    uint32 // its number in the table's running calls
	gen    uint32 // the serial of the generation whose index holds it
}

// dedupGen is one generation of answered calls, and the calls that began
// while it was current and still run.
type dedupGen struct {
	index  dedupIndex
	slots  [][]dedupSlot // answers, in the order they were given, in chunks of dedupSlotChunk
	n      int           // answers in slots
	chunks [][]byte      // answers' bytes, in the same order; spare ones after the first used
	used   int           // chunks in use
	kept   []dedupKept   // answers' large values, kept by reference
	born   time.Duration
	bytes  int // charged by its answers (see dedupAnswerCost)
	live   int // answers the index still finds
}

// dedupSlot is one answered call. Its bytes are at place in its
// generation's arena (the chunk above the low 16 bits, the offset in it
// in them): the metadata's key and value lengths (uint32s, in
// turn), the error, the payload (unless kept by reference), then the
// metadata's keys and values. It holds no pointers.
type dedupSlot struct {
	key    dedupKey
	digest uint64
	at     time.Duration // since the table's start, when it was answered
	place  uint32
	size   uint32 // of its bytes in the arena
	errLen uint32
	payLen uint32
	metaN  uint32 // metadata pairs
	kept   uint32 // its dedupKept's index plus one; 0: none
	code   Code
	codec  Codec
	flags  MessageFlags
}

// dedupKept is what an answer keeps by reference: a large payload the
// node encoded for it (see dedupShareMin), or a large result not yet
// encoded (a transport encodes it into its frame: see ServeMessageBody).
type dedupKept struct {
	shared  []byte
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
	// dedupAnswerCost is what an answer costs beyond its bytes: its slot
	// and its share of the index, which is at most half full.
	dedupAnswerCost = dedupSlotSize + 2*8
	// dedupChunk is the size of the chunks of a generation's arena
	// (offsets in them fit 16 bits), and 1<<dedupSlotBits the slots in a
	// chunk of slots.
	dedupChunk    = 64 << 10
	dedupSlotBits = 10
	// maxFreeEntries bounds the entries kept for reuse.
	maxFreeEntries = 1024
	// dedupFirstAnswers is the answers a generation's index has room for
	// at first (256 KiB: a busy node fills it within a second), and
	// dedupIndexStart its cells.
	dedupFirstAnswers = 16384
	dedupIndexStart   = 2 * dedupFirstAnswers
)

// newDedupTable makes a table that keeps answers for ttl, at most size of
// them if size is not zero.
func newDedupTable(size int, ttl time.Duration) *dedupTable {
	t := &dedupTable{
		ttl:      ttl,
		maxBytes: dedupMaxBytes,
		maxRan:   dedupMaxRan,
		start:    time.Now(),
		callers:  make(map[callerKey]*dedupCaller),
		byNum:    make(map[uint64]*dedupCaller),
		seed:     maphash.MakeSeed(),
	}
	if size > 0 {
		t.genMax = max(size/2, 1)
	}
	for i := range t.gens {
		t.gens[i].index = newDedupIndex(dedupFirstAnswers)
	}
	t.serial = 1 // gens[1], never used, is serial 0
	return t
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
// dedupOther; a copy of a call whose answer was dropped for room is
// dedupGone.
func (t *dedupTable) begin(caller callerKey, id, digest uint64) (*dedupEntry, dedupSeen) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.intern(caller)
	k := dedupKey{c.num, id}
	h := dedupHash(k)
	for _, gi := range [...]int{t.cur, t.cur ^ 1} {
		g := &t.gens[gi]
		if !c.mayHold(gi, t.gen(gi), id) {
			continue
		}
		i, ref, ok := t.find(g, h, k)
		if !ok {
			continue
		}
		if ref&runBit != 0 {
			e := t.running[ref&^runBit]
			if e.digest != digest {
				return nil, dedupOther
			}
			if e.done == nil {
				e.done = make(chan struct{})
			}
			return e, dedupCopy
		}
		if s := g.slot(ref); time.Since(t.start)-s.at <= t.ttl {
			if s.digest != digest {
				return nil, dedupOther
			}
			return &dedupEntry{key: k, digest: digest, answer: g.answer(s)}, dedupCopy
		}
		// Expired, though its generation is not yet dropped: the answer
		// no longer counts.
		g.index.forget(i)
		g.live--
		break // a key is in one generation at most
	}
	if c.ran.n > 0 {
		if r, ok := t.findRan(c, id); ok {
			if r.digest != digest {
				return nil, dedupOther
			}
			return nil, dedupGone
		}
	}
	var e *dedupEntry
	if n := len(t.free); n > 0 {
		e, t.free = t.free[n-1], t.free[:n-1]
	} else {
		e = new(dedupEntry)
	}
	*e = dedupEntry{key: k, digest: digest, caller: c, hash: h, gen: t.serial}
	if n := len(t.freeRuns); n > 0 {
		e.run, t.freeRuns = t.freeRuns[n-1], t.freeRuns[:n-1]
		t.running[e.run] = e
	} else {
		e.run = uint32(len(t.running))
		t.running = append(t.running, e)
	}
	t.insert(e, runBit|e.run)
	return e, dedupNew
}

// insert adds e's key to the current generation's index with reference
// ref. Callers hold mu.
func (t *dedupTable) insert(e *dedupEntry, ref uint32) {
	t.gens[t.cur].index.insert(e.hash, ref)
	e.caller.saw(t.cur, t.serial, e.key.id)
}

// find returns the position in g's index of k's cell and the cell's
// reference: a running call's number with runBit, or its answer's slot
// plus one.
func (t *dedupTable) find(g *dedupGen, h uint32, k dedupKey) (uint64, uint32, bool) {
	x := &g.index
	for i := uint64(h) & x.mask; ; i = (i + 1) & x.mask {
		c := x.cells[i]
		if c == 0 {
			return 0, 0, false
		}
		if uint32(c>>32) != h {
			continue
		}
		switch ref := uint32(c); {
		case ref == deadRef:
		case ref&runBit != 0:
			if t.running[ref&^runBit].key == k {
				return i, ref, true
			}
		default:
			if g.slot(ref).key == k {
				return i, ref, true
			}
		}
	}
}

// intern returns caller's number. Callers hold mu. The table of numbers
// is bounded in count, and so in bytes: its keys have a fixed size.
func (t *dedupTable) intern(caller callerKey) *dedupCaller {
	if t.lastCaller != nil && caller == t.last {
		return t.lastCaller // comparing the key is cheaper than hashing it
	}
	c := t.callers[caller]
	if c == nil {
		if len(t.callers) >= maxInternedCallers {
			t.forgetCallers()
		}
		t.nextCaller++
		c = &dedupCaller{num: t.nextCaller}
		t.callers[caller] = c
		t.byNum[c.num] = c
	}
	t.last, t.lastCaller = caller, c
	return c
}

// forgetCallers makes room in the interned callers: it forgets those
// that neither generation nor the records of calls run know, or, when
// that frees less than a quarter of the room, every caller (their
// answers and records are then not found again). Numbers are never
// reused, so a forgotten caller's calls are new calls to the table.
// Callers hold mu.
func (t *dedupTable) forgetCallers() {
	for k, c := range t.callers {
		if !c.mayHold(0, t.gen(0), c.top[0]) && !c.mayHold(1, t.gen(1), c.top[1]) && c.ran.n == 0 {
			delete(t.callers, k)
			delete(t.byNum, c.num)
		}
	}
	if len(t.callers) > maxInternedCallers*3/4 {
		for _, c := range t.byNum {
			t.forgetRan(c)
		}
		clear(t.callers)
		clear(t.byNum)
	}
	t.last, t.lastCaller = callerKey{}, nil
}

// finish records e's answer (never nil: calls without an answer are not
// de-duplicated) and hands it to the duplicates waiting. When keep is
// false (the call was refused without running) the call is forgotten, so
// that a later attempt runs it.
func (t *dedupTable) finish(e *dedupEntry, reply *Message, keep bool) {
	now := time.Since(t.start)
	charge := dedupCharge(reply)
	t.mu.Lock()
	defer t.mu.Unlock()
	if int(e.run) >= len(t.running) || t.running[e.run] != e {
		return // a copy's entry, or finished already: nothing runs
	}
	if e.done != nil {
		e.answer = ownCopy(reply)
		close(e.done)
	}
	if keep {
		t.makeRoom(now, charge) // may move e to the current generation
	}
	g := t.genOf(e.gen)
	i := g.index.findRef(e.hash, runBit|e.run)
	t.running[e.run] = nil
	t.freeRuns = append(t.freeRuns, e.run)
	switch {
	case keep && e.gen == t.serial:
		g.index.cells[i] = uint64(e.hash)<<32 | uint64(t.store(g, e, now, reply))
	case keep: // it began in the generation before
		g.index.forget(i)
		t.insert(e, t.store(&t.gens[t.cur], e, now, reply))
	default:
		g.index.forget(i)
	}
	if e.done == nil && len(t.free) < maxFreeEntries {
		t.free = append(t.free, e) // no duplicate holds it
	}
	if keep {
		t.lastAt = now
		if !t.sweeping && !t.stopped {
			t.sweeping = true
			if t.sweep == nil {
				t.sweep = time.AfterFunc(t.ttl+dedupSweepLate, t.sweepIdle)
			} else {
				t.sweep.Reset(t.ttl + dedupSweepLate)
			}
		}
	}
}

// dedupSweepLate is how long after the last answer's ttl the sweep runs.
const dedupSweepLate = time.Second

// sweepIdle is the sweep: when every answer stored has expired it drops
// both generations, giving their arrays back, else it runs again once
// the last one has.
func (t *dedupTable) sweepIdle() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	now := time.Since(t.start)
	if left := t.lastAt + t.ttl - now; left > 0 {
		t.sweep.Reset(left + dedupSweepLate)
		return
	}
	t.sweeping = false
	t.rotate(now, true) // the one before, then the current one
	t.rotate(now, true)
}

// stop stops the sweep for good (the node is closing).
func (t *dedupTable) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	if t.sweep != nil {
		t.sweep.Stop()
	}
}

// genOf returns the generation of serial, the current one or the one
// before. Callers hold mu.
func (t *dedupTable) genOf(serial uint32) *dedupGen {
	if serial == t.serial {
		return &t.gens[t.cur]
	}
	return &t.gens[t.cur^1]
}

// gen returns the serial of gens[i]. Callers hold mu.
func (t *dedupTable) gen(i int) uint32 {
	if i == t.cur {
		return t.serial
	}
	return t.serial - 1
}

// makeRoom starts a new generation, dropping the one before, when the
// current one is older than ttl (the one before has expired then), or
// would pass half the bound on bytes or count with an answer charging
// charge bytes: so the table keeps at most the bound, and always the
// newest answers up to half of it. Callers hold mu.
func (t *dedupTable) makeRoom(now time.Duration, charge int) {
	cur := &t.gens[t.cur]
	if aged := now-cur.born > t.ttl; aged || cur.n > 0 && (cur.bytes+charge > t.maxBytes/2 || t.genMax > 0 && cur.n >= t.genMax) {
		t.rotate(now, aged)
	}
	if t.bytes+charge > t.maxBytes { // an answer larger than half the bound
		t.rotate(now, false)
	}
}

// rotate drops the generation before the current one and starts a new
// one in its arrays. The calls still running that began in the dropped
// one move to the new one. A generation dropped for its age (aged) had
// a whole ttl to fill: calls come slower than its arrays were sized for,
// maybe after a burst, so they go back to the collector and the new
// generation starts as small as the table's first; one dropped for room
// reuses them. Callers hold mu.
func (t *dedupTable) rotate(now time.Duration, aged bool) {
	g := &t.gens[t.cur^1]
	if !aged {
		t.keepRan(g, now)
	}
	t.bytes -= g.bytes
	if aged && len(g.index.cells) > dedupIndexStart {
		g.index = newDedupIndex(dedupFirstAnswers)
	} else {
		clear(g.index.cells)
		g.index.used = 0
	}
	clear(g.kept) // release what they hold
	g.kept = g.kept[:0]
	g.n = 0
	g.chunks = slices.DeleteFunc(g.chunks, func(c []byte) bool { return cap(c) > dedupChunk })
	if aged {
		// Arrays of their own: the old ones, which still hold every
		// chunk past the first, go to the collector.
		g.chunks = append([][]byte(nil), g.chunks[:min(len(g.chunks), 1)]...)
		g.slots = append([][]dedupSlot(nil), g.slots[:min(len(g.slots), 1)]...)
	}
	for i := range g.chunks {
		g.chunks[i] = g.chunks[i][:0]
	}
	g.used = 0
	g.born, g.bytes, g.live = now, 0, 0
	t.cur ^= 1
	t.serial++
	for _, e := range t.running {
		if e != nil && e.gen == t.serial-2 {
			e.gen = t.serial
			t.insert(e, runBit|e.run)
		}
	}
}

// store appends e's answer m to g and returns the reference to its slot.
// Callers hold mu.
func (t *dedupTable) store(g *dedupGen, e *dedupEntry, now time.Duration, m *Message) uint32 {
	ci := g.room(inlineBytes(m))
	c := g.chunks[ci]
	s := dedupSlot{key: e.key, digest: e.digest, at: now, place: uint32(ci<<16 | len(c))}
	var kv dedupKept
	g.chunks[ci], kv = s.set(c, m)
	if kv.shared != nil || kv.body != nil {
		g.kept = append(g.kept, kv)
		s.kept = uint32(len(g.kept))
	}
	if g.n>>dedupSlotBits == len(g.slots) {
		g.slots = append(g.slots, make([]dedupSlot, 1<<dedupSlotBits))
	}
	g.slots[g.n>>dedupSlotBits][g.n&(1<<dedupSlotBits-1)] = s
	g.n++
	charge := int(s.size) + dedupAnswerCost + len(kv.shared) + kv.bodyLen
	g.bytes += charge
	t.bytes += charge
	g.live++
	return uint32(g.n)
}

// slot returns the slot of reference ref (its number plus one).
func (g *dedupGen) slot(ref uint32) *dedupSlot {
	i := ref - 1
	return &g.slots[i>>dedupSlotBits][i&(1<<dedupSlotBits-1)]
}

// room returns the chunk of g's arena to append n bytes to: the last one
// in use, a spare one or a new one, or for more than a chunk's bytes, a
// chunk of their own (not kept for reuse).
func (g *dedupGen) room(n int) int {
	if g.used > 0 {
		if c := g.chunks[g.used-1]; len(c) < 1<<16 && cap(c)-len(c) >= n {
			return g.used - 1
		}
	}
	switch {
	case n > dedupChunk:
		c := make([]byte, 0, n)
		if g.used < len(g.chunks) {
			g.chunks = append(g.chunks, g.chunks[g.used]) // move the spare one on
			g.chunks[g.used] = c
		} else {
			g.chunks = append(g.chunks, c)
		}
	case g.used == len(g.chunks):
		g.chunks = append(g.chunks, make([]byte, 0, dedupChunk))
	}
	g.used++
	return g.used - 1
}

// inlineBytes is the size of what a slot's set appends of m to the
// arena.
func inlineBytes(m *Message) int {
	n := 8*len(m.Meta) + len(m.Error)
	for _, p := range m.Meta {
		n += len(p.Key) + len(p.Value)
	}
	switch {
	case sharedPayload(m) != nil:
	case m.body != nil:
		if m.bodyLen < dedupShareMin {
			n += m.bodyLen
		}
	default:
		n += len(m.Payload)
	}
	return n
}

// len returns the number of calls the table knows, running or answered
// (expired answers included until found or dropped).
func (t *dedupTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.running) - len(t.freeRuns) + t.gens[0].live + t.gens[1].live
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

// set fills s with m, its bytes appended to arena (which returns): a
// reply may alias the buffer of the request's frame, which the transport
// reuses. A large payload the node encoded for m alone (see
// sharedPayload), or a large result not yet encoded, is kept by
// reference in kv instead; a small result is encoded into arena.
func (s *dedupSlot) set(arena []byte, m *Message) (_ []byte, kv dedupKept) {
	s.code, s.codec, s.flags = m.Code, m.Codec, m.Flags
	s.errLen, s.metaN = uint32(len(m.Error)), uint32(len(m.Meta))
	start := len(arena)
	for _, p := range m.Meta {
		arena = binary.LittleEndian.AppendUint32(arena, uint32(len(p.Key)))
		arena = binary.LittleEndian.AppendUint32(arena, uint32(len(p.Value)))
	}
	arena = append(arena, m.Error...)
	switch kv.shared = sharedPayload(m); {
	case kv.shared != nil:
	case m.body != nil && m.bodyLen < dedupShareMin:
		n := len(arena)
		b, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(arena, m.body)
		if err == nil { // plainMessage makes an error unreachable
			arena = b
			s.payLen = uint32(len(arena) - n)
			break
		}
		fallthrough
	case m.body != nil:
		kv.body, kv.bodyLen = m.body, m.bodyLen
	default:
		arena = append(arena, m.Payload...)
		s.payLen = uint32(len(m.Payload))
	}
	for _, p := range m.Meta {
		arena = append(append(arena, p.Key...), p.Value...)
	}
	s.size = uint32(len(arena) - start)
	return arena, kv
}

// answer returns a copy of the answer s holds, which shares no memory
// with g but what it keeps by reference, which no one changes.
func (g *dedupGen) answer(s *dedupSlot) *Message {
	var kv dedupKept
	if s.kept != 0 {
		kv = g.kept[s.kept-1]
	}
	return s.answer(g.chunks[s.place>>16][s.place&(1<<16-1):][:s.size], kv)
}

// answer returns a copy of the answer s holds, its bytes b and kv.
func (s *dedupSlot) answer(b []byte, kv dedupKept) *Message {
	lens, buf := b[:8*s.metaN], append([]byte(nil), b[8*s.metaN:]...)
	str := func(n uint32) string {
		if n == 0 {
			return ""
		}
		v := bytesString(buf[:n])
		buf = buf[n:]
		return v
	}
	m := &Message{Code: s.code, Codec: s.codec, Flags: s.flags, Error: str(s.errLen)}
	m.body, m.bodyLen = kv.body, kv.bodyLen
	if kv.shared != nil {
		m.Payload, m.owned = kv.shared, true
	} else if s.payLen > 0 {
		m.Payload, buf = buf[:s.payLen:s.payLen], buf[s.payLen:]
	}
	if s.metaN > 0 {
		m.Meta = make([]MetaPair, s.metaN)
		for i := range m.Meta {
			k, v := binary.LittleEndian.Uint32(lens[8*i:]), binary.LittleEndian.Uint32(lens[8*i+4:])
			m.Meta[i] = MetaPair{str(k), str(v)}
		}
	}
	return m
}

// ownCopy returns a copy of m that shares no memory with it but what a
// slot would keep by reference: for the duplicates waiting on a call.
func ownCopy(m *Message) *Message {
	var s dedupSlot
	b, kv := s.set(nil, m)
	return s.answer(b, kv)
}

// dedupCharge is what keeping m costs the table's bound on bytes.
func dedupCharge(m *Message) int {
	return messageBytes(m) + 8*len(m.Meta) + dedupAnswerCost
}

// messageBytes is the size of m's payload, error and metadata.
func messageBytes(m *Message) int {
	size := len(m.Payload) + len(m.Error) + m.bodyLen
	for _, p := range m.Meta {
		size += len(p.Key) + len(p.Value)
	}
	return size
}

// dedupIndex maps the keys of a generation's calls to their slots or
// running calls: open addressing with linear probing, at most half full
// (tombstones included), so a key that is not there — every call's first
// attempt — is told apart within a probe or two. A cell holds the key's
// hash (whose low bits are its home cell) above its reference: an
// answer's slot plus one, a running call's number with runBit, or
// deadRef for a key forgotten; zero is empty. Nothing is removed but the
// rare forgotten key: a generation's index is cleared whole when it is
// dropped.
type dedupIndex struct {
	cells []uint64
	mask  uint64
	used  int // cells not empty
}

const (
	runBit  = 1 << 31   // a running call's reference
	deadRef = 1<<32 - 1 // a forgotten key's
)

// newDedupIndex makes an index with room for n keys.
func newDedupIndex(n int) dedupIndex {
	size := 16
	for size < 2*n {
		size <<= 1
	}
	return dedupIndex{cells: make([]uint64, size), mask: uint64(size - 1)}
}

// dedupHash mixes a key's two numbers (a splitmix64 finaliser) but the
// low three bits of its id, which stay: a node numbers its calls in
// turn, so eight of its calls in a row have their home cells in one
// cache line, which the call before has just touched, in each
// generation's index.
func dedupHash(k dedupKey) uint32 {
	h := k.id>>3 ^ k.caller*0x9e3779b97f4a7c15
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return uint32(h)&^7 | uint32(k.id&7)
}

// insert adds a key with hash h and reference ref, which is not in x.
func (x *dedupIndex) insert(h, ref uint32) {
	if 2*(x.used+1) > len(x.cells) {
		x.rehash()
	}
	for i := uint64(h) & x.mask; ; i = (i + 1) & x.mask {
		switch c := x.cells[i]; {
		case c == 0:
			x.used++
		case uint32(c) != deadRef:
			continue
		}
		x.cells[i] = uint64(h)<<32 | uint64(ref)
		return
	}
}

// findRef returns the position of the cell of hash h and reference ref,
// which is in x.
func (x *dedupIndex) findRef(h, ref uint32) uint64 {
	want := uint64(h)<<32 | uint64(ref)
	i := uint64(h) & x.mask
	for x.cells[i] != want {
		i = (i + 1) & x.mask
	}
	return i
}

// forget drops the cell at i: emptied if the run it is in ends after it,
// else marked dead, so that the keys after it are still found.
func (x *dedupIndex) forget(i uint64) {
	if x.cells[(i+1)&x.mask] == 0 {
		x.cells[i] = 0
		x.used--
		return
	}
	x.cells[i] = x.cells[i]&^(1<<32-1) | deadRef
}

// rehash moves x's keys into new cells, dropping the dead ones, at most a
// quarter full.
func (x *dedupIndex) rehash() {
	live := 0
	for _, c := range x.cells {
		if c != 0 && uint32(c) != deadRef {
			live++
		}
	}
	size := len(x.cells)
	for 4*(live+1) > size {
		size <<= 1
	}
	old := x.cells
	*x = dedupIndex{cells: make([]uint64, size), mask: uint64(size - 1)}
	for _, c := range old {
		if c != 0 && uint32(c) != deadRef {
			i := (c >> 32) & x.mask
			for x.cells[i] != 0 {
				i = (i + 1) & x.mask
			}
			x.cells[i] = c
			x.used++
		}
	}
}
