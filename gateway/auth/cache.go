package auth

import (
	"container/list"
	"crypto/sha256"
	"sync"
	"time"
)

// answerCache holds the delegate's answers until they expire, bounded in
// entries and bytes; at a bound the least recently used answers go first.
type answerCache struct {
	maxEntries, maxBytes int

	mu    sync.Mutex
	m     map[[sha256.Size]byte]*list.Element
	lru   list.List // of *cached, most recently used first
	bytes int
}

type cached struct {
	key   [sha256.Size]byte
	id    *Identity
	until time.Time
	size  int
}

// entryOverhead approximates the memory of an entry beside its answer.
const entryOverhead = 256

func newAnswerCache(entries, bytes int) *answerCache {
	return &answerCache{maxEntries: entries, maxBytes: bytes, m: map[[sha256.Size]byte]*list.Element{}}
}

// get returns the identity cached under key, if it has not expired at now.
func (c *answerCache) get(key [sha256.Size]byte, now time.Time) (*Identity, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok {
		return nil, false
	}
	ce := e.Value.(*cached)
	if !now.Before(ce.until) {
		c.remove(e)
		return nil, false
	}
	c.lru.MoveToFront(e)
	return ce.id, true
}

// put caches id under key until until; size is the answer's size.
func (c *answerCache) put(key [sha256.Size]byte, id *Identity, until time.Time, size int) {
	size += entryOverhead
	if size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.remove(e)
	}
	c.m[key] = c.lru.PushFront(&cached{key: key, id: id, until: until, size: size})
	c.bytes += size
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
