package runtime

import (
	"sync"
	"sync/atomic"
)

// target is a parsed pattern with its cached resolution.
type target struct {
	pattern Pattern
	values  []any // the pattern's values, boxed once for Act's merged maps
	res     atomic.Pointer[resolution]
}

func newTarget(p Pattern) *target {
	t := &target{pattern: p}
	for _, pr := range p.pairs() {
		t.values = append(t.values, pr.Value)
	}
	return t
}

type resolution struct {
	gen   uint64
	route *route
}

// targetCache caches parsed pattern strings, bounded: when it holds
// maxTargets entries it starts over.
type targetCache struct {
	m sync.Map // string -> *target
	n atomic.Int64
}

const maxTargets = 4096

func (c *targetCache) get(s string) (*target, error) {
	if v, ok := c.m.Load(s); ok {
		return v.(*target), nil
	}
	p, err := ParsePattern(s)
	if err != nil {
		return nil, err
	}
	if c.n.Add(1) > maxTargets {
		c.m.Clear()
		c.n.Store(1)
	}
	v, _ := c.m.LoadOrStore(s, newTarget(p))
	return v.(*target), nil
}

// resolve finds t's route, cached until the routing changes.
func (n *Node) resolve(t *target) *route {
	g := n.gen.Load()
	if res := t.res.Load(); res != nil && res.gen == g {
		return res.route
	}
	var r *route
	if re := n.router.findPattern(t.pattern); re != nil {
		r = re.value
	}
	t.res.Store(&resolution{gen: g, route: r})
	return r
}
