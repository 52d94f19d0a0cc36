package runtime

import (
	"sync"
	"sync/atomic"
)

// cachedPattern is a parsed pattern string with its cached resolution.
type cachedPattern struct {
	pattern Pattern
	values  []any // the pattern's values, boxed once for Act's merged maps
	res     atomic.Pointer[resolution]
}

func newCachedPattern(p Pattern) *cachedPattern {
	t := &cachedPattern{pattern: p}
	for _, pr := range p.pairs() {
		t.values = append(t.values, pr.Value)
	}
	return t
}

type resolution struct {
	gen   uint64
	route *route
}

// patternCache caches parsed pattern strings, bounded: when it holds
// maxCachedPatterns entries it starts over.
type patternCache struct {
	m sync.Map // string -> *cachedPattern
	n atomic.Int64
}

const maxCachedPatterns = 4096

func (c *patternCache) get(s string) (*cachedPattern, error) {
	if v, ok := c.m.Load(s); ok {
		return v.(*cachedPattern), nil
	}
	p, err := ParsePattern(s)
	if err != nil {
		return nil, err
	}
	if c.n.Add(1) > maxCachedPatterns {
		c.m.Clear()
		c.n.Store(1)
	}
	v, _ := c.m.LoadOrStore(s, newCachedPattern(p))
	return v.(*cachedPattern), nil
}

// resolve finds t's route, cached until the routing changes.
func (n *Node) resolve(t *cachedPattern) *route {
	g := n.gen.Load()
	if res := t.res.Load(); res != nil && res.gen == g {
		return res.route
	}
	r := routeOf(n.router.findPattern(t.pattern))
	t.res.Store(&resolution{gen: g, route: r})
	return r
}
