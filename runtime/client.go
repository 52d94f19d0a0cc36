package runtime

import (
	"context"
)

// Version is the runtime's version.
const Version = "0.1.0"

// IsAtLeastVersion0_1_0 is referenced by generated code: a build against an
// older runtime fails at compile time instead of misbehaving.
const IsAtLeastVersion0_1_0 = true

// Registrar is what generated RegisterXHandler functions add handlers to.
// [*Node] implements it.
type Registrar interface {
	Add(pattern string, h Handler, opts ...HandlerOption) error
}

// Caller is what generated clients call through. [*Node] implements it,
// and generated clients built on a *Node take its fast path.
type Caller interface {
	ActE(ctx context.Context, pattern string, data any, opts ...CallOption) (Result, error)
}

var (
	_ Registrar = (*Node)(nil)
	_ Caller    = (*Node)(nil)
)

// Client is a typed caller of one pattern; generated clients are made of
// them. Its pattern is parsed once, and on a *Node its resolution is cached
// until the node's routing changes, so a call costs one atomic load plus the
// handler.
type Client[Req, Res any] struct {
	caller  Caller
	node    *Node
	pattern string
	parsed  cachedPattern
	cfg     callConfig
	plain   bool // no mixins: the pattern alone routes, resolution is cached
	err     error
}

// NewClient returns a client that calls pattern through c with [Node.ActE]
// semantics: the request is the data, and only the pattern (plus any
// [Mixin] fields) routes. An invalid pattern is reported by every Call.
func NewClient[Req, Res any](c Caller, pattern string, opts ...ClientOption) *Client[Req, Res] {
	cl := &Client[Req, Res]{caller: c, pattern: pattern}
	for _, o := range opts {
		if o != nil {
			o.applyClient(&cl.cfg)
		}
	}
	cl.plain = len(cl.cfg.mixin) == 0
	p, err := ParsePattern(pattern)
	if err != nil {
		cl.err = err
	}
	node, isNode := c.(*Node)
	if c == nil || isNode && node == nil {
		cl.err = Errorf(CodeInvalidArgument, "wizard: NewClient(%q): nil Caller", pattern)
	}
	cl.parsed.pattern = p
	cl.node = node
	return cl
}

// Pattern returns the client's pattern in canonical form.
func (c *Client[Req, Res]) Pattern() Pattern { return c.parsed.pattern }

// Call calls the client's pattern with req and returns the handler's result
// as a *Res. With [NoReply] it returns (nil, nil) at once.
func (c *Client[Req, Res]) Call(ctx context.Context, req *Req, opts ...CallOption) (*Res, error) {
	if c.err != nil {
		return nil, c.err
	}
	var res Result
	var err error
	switch {
	case c.node != nil && c.plain && len(opts) == 0 && c.node.invoker == nil:
		// Node.actE's plain path, inlined: going through actE costs ~3 ns
		// (about 9%) on the generated-client path (BenchmarkActE_Precomputed).
		r := c.node.resolve(&c.parsed)
		if r == nil {
			res, err = c.node.notFound(c.parsed.pattern.String(), &c.cfg)
		} else {
			res, err = c.node.call(ctx, r, req, nil, &c.cfg)
		}
	case c.node != nil && len(opts) == 0:
		res, err = c.node.actE(ctx, &c.parsed, req, &c.cfg)
	case c.node != nil:
		cfg := c.cfg
		cfg.mixin = append([]string(nil), cfg.mixin...)
		for _, o := range opts {
			if o != nil {
				o.applyCall(&cfg)
			}
		}
		res, err = c.node.actE(ctx, &c.parsed, req, &cfg)
	default:
		all := make([]CallOption, 0, len(opts)+1)
		all = append(all, clientCallOption{c.cfg})
		all = append(all, opts...)
		res, err = c.caller.ActE(ctx, c.pattern, req, all...)
	}
	if err != nil {
		return nil, err
	}
	if out, ok := res.v.(*Res); ok {
		return out, nil
	}
	if res.v == nil {
		return nil, nil
	}
	out := new(Res)
	if err := res.Decode(out); err != nil {
		return nil, err
	}
	return out, nil
}

// clientCallOption carries a client's options to a Caller that is not a Node.
type clientCallOption struct{ cfg callConfig }

func (o clientCallOption) applyCall(c *callConfig) {
	mixin := append(c.mixin, o.cfg.mixin...)
	*c = o.cfg
	c.mixin = mixin
}
