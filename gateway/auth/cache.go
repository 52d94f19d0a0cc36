package auth

import (
	"container/list"
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"time"
)

// answerCache holds verified identities, keyed by their token's SHA-256,
// until they expire, bounded in entries and bytes; at a bound the least
// recently used go first. The delegate caches its pattern's answers in
// one, the JWT verifier its verified tokens. Only successes enter it: a
// refused token costs its caller a verification, never a cached entry of
// the good ones.
type answerCache struct {
	maxEntries, maxBytes int

	hits, misses atomic.Uint64

	mu    sync.Mutex
	m     map[[sha256.Size]byte]*list.Element
	lru   list.List // of *cached, most recently used first
	bytes int
}

// cached is one entry: id is served while from <= now < until and the
// current key set is keys (nil for the delegate, which has none).
type cached struct {
	key         [sha256.Size]byte
	id          *Identity
	from, until time.Time
	keys        *keyset
	size        int
}

// entryOverhead approximates the memory of an entry beside its answer.
const entryOverhead = 256

func newAnswerCache(entries, bytes int) *answerCache {
	return &answerCache{maxEntries: entries, maxBytes: bytes, m: map[[sha256.Size]byte]*list.Element{}}
}

// get returns the identity cached under key if, at now, it is still valid
// (from <= now < until) and was verified with keys, the current key set.
// An entry that fails these checks is dropped: the caller verifies the
// token again. Every call counts as a hit or a miss.
func (c *answerCache) get(key [sha256.Size]byte, now time.Time, keys *keyset) (*Identity, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok {
		c.misses.Add(1)
		return nil, false
	}
	ce := e.Value.(*cached)
	if !now.Before(ce.until) || now.Before(ce.from) || ce.keys != keys {
		c.remove(e)
		c.misses.Add(1)
		return nil, false
	}
	c.lru.MoveToFront(e)
	c.hits.Add(1)
	return ce.id, true
}

// put caches the entry ce, whose size is that of its answer.
func (c *answerCache) put(ce cached) {
	ce.size += entryOverhead
	if ce.size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[ce.key]; ok {
		c.remove(e)
	}
	c.m[ce.key] = c.lru.PushFront(&ce)
	c.bytes += ce.size
	for c.lru.Len() > c.maxEntries || c.bytes > c.maxBytes {
		c.remove(c.lru.Back())
	}
}

func (c *answerCache) remove(e *list.Element) {
	ce := c.lru.Remove(e).(*cached)
	delete(c.m, ce.key)
	c.bytes -= ce.size
}

// len returns the number of entries and their bytes.
func (c *answerCache) len() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.bytes
}

// CacheStats are a verifier's cache counters since it was made.
type CacheStats struct {
	// Hits counts the verifications answered from the cache.
	Hits uint64
	// Misses counts the verifications the cache could not answer (the
	// token was not there, had expired, or its key set had changed): each
	// verified the token in full.
	Misses uint64
	// Entries and Bytes are the cache's size now (Bytes as estimated for
	// its bound).
	Entries, Bytes int
}

// stats returns c's counters; a nil c (no cache) has none.
func (c *answerCache) stats() CacheStats {
	if c == nil {
		return CacheStats{}
	}
	n, b := c.len()
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Entries: n, Bytes: b}
}
