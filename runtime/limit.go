package runtime

import (
	"cmp"
	"math"
	goruntime "runtime"
	"runtime/debug"
	"strings"

	"github.com/wizardmesh/wizard/runtime/internal/patrun"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// The bytes of a pattern, and of a key, that an error message repeats.
const (
	maxEcho    = patrun.MaxEcho
	maxEchoKey = patrun.MaxEchoKey
)

// quoteClipped quotes s for a message, cut to its first max bytes (at a
// character boundary) followed by "… (N bytes)" when it is longer.
func quoteClipped(s string, max int) string { return patrun.QuoteClipped(s, max) }

// limits bound what a node takes from other nodes before it parses or
// keeps any of it: the patterns of the calls it serves (and the pattern a
// call's message is overlaid with), its peers' catalog patterns, and the
// metadata of the calls it serves. See [WithMaxPatternSize] and
// [WithMaxMetadataSize].
type limits struct {
	patternBytes int
	patternKeys  int
	metaValue    int
	metaTotal    int
}

// The default limits. A real pattern is a few pairs, well under a
// kilobyte; real metadata is ids, a trace context and a token.
const (
	defaultMaxPatternBytes = 4 << 10
	defaultMaxPatternKeys  = 64
	defaultMaxMetaValue    = 8 << 10
	defaultMaxMetaTotal    = 16 << 10
)

func newLimits(c *nodeConfig) limits {
	return limits{
		patternBytes: cmp.Or(c.maxPatternBytes, defaultMaxPatternBytes),
		patternKeys:  cmp.Or(c.maxPatternKeys, defaultMaxPatternKeys),
		metaValue:    cmp.Or(c.maxMetaValue, defaultMaxMetaValue),
		metaTotal:    cmp.Or(c.maxMetaTotal, defaultMaxMetaTotal),
	}
}

// parse parses a pattern another node sent, refusing one over l's bounds
// before reading it.
func (l *limits) parse(s string) (pattern.Pattern, error) {
	if len(s) > l.patternBytes {
		return pattern.Pattern{}, l.tooLong(s)
	}
	return patrun.ParseMax(s, l.patternKeys)
}

func (l *limits) tooLong(s string) error {
	return Errorf(CodeInvalidArgument, "wizard: pattern %s is longer than the limit of %d bytes", quoteClipped(s, maxEcho), l.patternBytes)
}

// over reports whether p, a pattern of this node's own, is over l's
// bounds: no other node with the same limits could call it.
func (l *limits) over(p pattern.Pattern) bool {
	return len(p.String()) > l.patternBytes || p.Len() > l.patternKeys
}

// checkMeta refuses metadata over l's bounds, saying which.
func (l *limits) checkMeta(meta []MetaPair) error {
	total := 0
	for _, m := range meta {
		if !isSystemKey(m.Key) {
			if err := checkMetaPair(m); err != nil {
				return err
			}
		}
		if len(m.Value) > l.metaValue {
			return Errorf(CodeInvalidArgument, "wizard: metadata %s holds %d bytes, more than the limit of %d", quoteClipped(m.Key, maxEchoKey), len(m.Value), l.metaValue)
		}
		total += len(m.Key) + len(m.Value)
	}
	if total > l.metaTotal {
		return Errorf(CodeInvalidArgument, "wizard: metadata of %d bytes, more than the limit of %d", total, l.metaTotal)
	}
	return nil
}

// wireHandler returns the local handler that serves s, the pattern of a
// call from another node, or nil. s may alias the buffer of a whole
// frame, payload included: the cache keeps a copy of it, and only when it
// leads to a handler. A pattern that leads nowhere costs its caller a
// parse, and this node no memory.
func (n *Node) wireHandler(s string) (*handlerEntry, error) {
	v, cached := n.wire.m.Load(s)
	t, _ := v.(*cachedPattern)
	if !cached {
		var err error
		if s, t, err = n.parseWire(s); err != nil {
			return nil, err
		}
	}
	r := n.resolve(t)
	if r == nil {
		return nil, nil
	}
	e := r.local.Load()
	if e != nil && !cached {
		n.wire.store(s, t)
	}
	return e, nil
}

// wireTarget is the parsed form of s, a pattern another node sent along
// with a call to one of this node's handlers (the pattern its message is
// overlaid with), cached as in [Node.wireHandler].
func (n *Node) wireTarget(s string) (*cachedPattern, error) {
	if v, ok := n.wire.m.Load(s); ok {
		return v.(*cachedPattern), nil
	}
	s, t, err := n.parseWire(s)
	if err != nil {
		return nil, err
	}
	return n.wire.store(s, t), nil
}

// parseWire parses s, a pattern received from another node, within the
// node's limits, into a cache entry that holds a copy of s (returned, the
// key to cache it by) and nothing of the frame.
func (n *Node) parseWire(s string) (string, *cachedPattern, error) {
	if len(s) > n.limits.patternBytes {
		return "", nil, n.limits.tooLong(s)
	}
	s = strings.Clone(s)
	p, err := patrun.ParseMax(s, n.limits.patternKeys)
	if err != nil {
		return "", nil, err
	}
	return s, newCachedPattern(p), nil
}

// The default bound on the handlers a node runs at once
// ([WithMaxInFlight]): inFlightPerCPU for each of GOMAXPROCS, within a
// quarter of the Go memory limit (GOMEMLIMIT) at handlerMemory each when
// one is set, and at least minDefaultInFlight. A handler that waits
// (on I/O, another call) holds its goroutine, its request and what it
// builds; past a few thousand per core, more running at once only adds
// memory and latency, and a node shedding them lets callers go to
// another replica.
const (
	inFlightPerCPU     = 2048
	handlerMemory      = 64 << 10
	minDefaultInFlight = 256
)

// defaultMaxInFlight returns the default bound on the handlers a node
// runs at once.
func defaultMaxInFlight() int {
	n := inFlightPerCPU * goruntime.GOMAXPROCS(0)
	if lim := debug.SetMemoryLimit(-1); lim < math.MaxInt64 {
		n = min(n, int(lim/4/handlerMemory))
	}
	return max(n, minDefaultInFlight)
}
