package runtime

import (
	"sync"
	"sync/atomic"

	"github.com/wizardmesh/wizard/runtime/internal/patrun"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// cachedPattern is a parsed pattern string with its cached resolution.
type cachedPattern struct {
	pattern pattern.Pattern
	values  []any // the pattern's values, boxed once for Act's merged maps
	res     atomic.Pointer[resolution]
}

func newCachedPattern(p pattern.Pattern) *cachedPattern {
	t := &cachedPattern{pattern: p}
	for _, pr := range patrun.PairsOf(p) {
		t.values = append(t.values, pr.Value)
	}
	return t
}

type resolution struct {
	gen   uint64
	route *route
}

// patternCache caches parsed pattern strings, bounded in entries and in
// bytes: when an entry would take it past maxCachedPatterns or
// maxCachedPatternBytes it starts over. An entry larger than
// maxCachedPatternSize is not kept: one would make it start over often.
type patternCache struct {
	m     sync.Map   // string -> *cachedPattern
	mu    sync.Mutex // serialises stores; loads take none
	n     int        // entries, guarded by mu
	bytes int        // their estimated size, guarded by mu
}

// The bounds of a patternCache. The entry of a real pattern, a few pairs,
// is estimated at about 500 bytes: the count bounds the cache first while
// entries average under 2 KiB.
const (
	maxCachedPatterns     = 4096
	maxCachedPatternBytes = 8 << 20
	maxCachedPatternSize  = 64 << 10
)

func (c *patternCache) get(s string) (*cachedPattern, error) {
	if v, ok := c.m.Load(s); ok {
		return v.(*cachedPattern), nil
	}
	p, err := pattern.Parse(s)
	if err != nil {
		return nil, err
	}
	return c.store(s, newCachedPattern(p)), nil
}

// store caches t as the parsed form of s, unless s is there already, and
// returns what is cached (t when it is too large to be).
func (c *patternCache) store(s string, t *cachedPattern) *cachedPattern {
	size := t.size(s)
	if size > maxCachedPatternSize {
		return t
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m.Load(s); ok {
		return v.(*cachedPattern)
	}
	if c.n >= maxCachedPatterns || c.bytes+size > maxCachedPatternBytes {
		c.m.Clear()
		c.n, c.bytes = 0, 0
	}
	c.m.Store(s, t)
	c.n++
	c.bytes += size
	return t
}

// size estimates the bytes t holds as the cache entry of s: s, the
// pattern, the boxed values and the headers of the entry and the map's.
func (t *cachedPattern) size(s string) int {
	return len(s) + patrun.Size(t.pattern) + 32*len(t.values) + 256
}

// resolve finds t's route, cached until the routing changes.
func (n *Node) resolve(t *cachedPattern) *route {
	g := n.gen.Load()
	if res := t.res.Load(); res != nil && res.gen == g {
		return res.route
	}
	r := n.findRoute(t.pattern)
	t.res.Store(&resolution{gen: g, route: r})
	return r
}
