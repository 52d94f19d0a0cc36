package runtime

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/patrun"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// Version is the release of wizard this runtime belongs to, as
// CHANGELOG.md names it; the wizard and wizard-gateway commands and the
// code protoc-gen-wizard generates report it.
const Version = "0.4.0"

// IsAtLeastVersion0_2_0 is referenced by generated code: a build against
// an older runtime fails at compile time, naming the version it needs,
// instead of misbehaving. (Code generated before 0.2.0, whose client
// constructors return no error, must be generated again.)
const IsAtLeastVersion0_2_0 = true

// IsAtLeastVersion0_3_0 is referenced by code generated since 0.3.0,
// which names its methods with [Method].
const IsAtLeastVersion0_3_0 = true

// IsAtLeastVersion0_5_0 is referenced by code generated for a file with
// streaming methods ([NewStreamHandler], [Client.Stream]), which 0.5.0
// brings.
const IsAtLeastVersion0_5_0 = true

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
	caller Caller
	node   *Node // caller, when it is a *Node: its fast path
	parsed cachedPattern
	opts   []CallOption // as given, for a Caller that is not a Node
	cfg    callConfig   // opts applied
	res    string       // Res's protobuf full name, or ""
}

// NewClient returns a client that calls pattern through c with [Node.ActE]
// semantics: the request is the data, and only the pattern (plus any
// [Mixin] fields) routes. opts apply to every call, before the call's own.
// A nil Caller, a malformed pattern or a bad option is an error.
func NewClient[Req, Res any](c Caller, pattern string, opts ...CallOption) (*Client[Req, Res], error) {
	node, isNode := c.(*Node)
	if c == nil || isNode && node == nil {
		return nil, Errorf(CodeInvalidArgument, "wizard: NewClient(%q): nil Caller", pattern)
	}
	p, err := patrun.Parse(pattern)
	if err != nil {
		return nil, err
	}
	if err := checkCallOptions(opts); err != nil {
		return nil, Errorf(CodeInvalidArgument, "wizard: NewClient(%q): %v", pattern, err)
	}
	cl := &Client[Req, Res]{caller: c, node: node, opts: slices.Clone(opts), res: protoName[Res]()}
	cl.parsed.pattern = p
	for _, o := range opts {
		o.applyCall(&cl.cfg)
	}
	return cl, nil
}

// checkCallOptions reports the first option that is nil or out of range,
// bundles included.
func checkCallOptions(opts []CallOption) error {
	for i, o := range opts {
		switch o := o.(type) {
		case nil:
			return fmt.Errorf("option %d of %d is nil", i+1, len(opts))
		case timeoutOption:
			if o < 0 {
				return fmt.Errorf("Timeout(%v): a timeout cannot be negative", time.Duration(o))
			}
		case mixinOption:
			if slices.Contains(o, "") {
				return fmt.Errorf("Mixin(%q): a key cannot be empty", []string(o))
			}
		case callOptions:
			if err := checkCallOptions(o); err != nil {
				return fmt.Errorf("WithCallOptions: %w", err)
			}
		}
	}
	return nil
}

// Pattern returns the client's pattern in canonical form.
func (c *Client[Req, Res]) Pattern() pattern.Pattern { return c.parsed.pattern }

// Call calls the client's pattern with req and returns the handler's result
// as a *Res. A handler that returns no result (nil, nil, or a nil *Res)
// gives an empty *Res, never nil, in-process as remotely (where nothing
// tells an empty message from none). An answer of another protobuf type
// than Res fails ([CodeInvalidArgument], naming both types). With
// [NoReply] it returns (nil, nil) at once.
func (c *Client[Req, Res]) Call(ctx context.Context, req *Req, opts ...CallOption) (*Res, error) {
	var res Result
	var err error
	switch n := c.node; {
	case n == nil:
		res, err = c.caller.ActE(ctx, c.parsed.pattern.String(), req, append(c.opts[:len(c.opts):len(c.opts)], opts...)...)
	case len(opts) > 0:
		cfg := c.cfg
		cfg.mixin = slices.Clone(cfg.mixin)
		for _, o := range opts {
			if o != nil {
				o.applyCall(&cfg)
			}
		}
		res, err = n.actE(ctx, &c.parsed, req, &cfg)
	case len(c.cfg.mixin) == 0 && n.invoker == nil:
		// Node.actE's plain path, inlined: the generated-client path
		// (BenchmarkActE_Precomputed) is short enough that one more call
		// frame shows.
		res, err = n.callRoute(ctx, n.resolve(&c.parsed), patrun.PairsOf(c.parsed.pattern), req, nil, &c.cfg)
	default:
		res, err = n.actE(ctx, &c.parsed, req, &c.cfg)
	}
	if err != nil {
		return nil, err
	}
	if out, ok := res.v.(*Res); ok && out != nil {
		return out, nil
	}
	if res.v == nil {
		if c.noReply(opts) {
			return nil, nil
		}
		return new(Res), nil
	}
	if got := messageType(res.v); c.res != "" && got != "" && got != c.res {
		return nil, errWrongResponse(c.parsed.pattern.String(), c.res, got)
	}
	out := new(Res)
	if err := res.Decode(out); err != nil {
		return nil, err
	}
	if c.node != nil && c.node.invoker == nil && c.res != "" {
		// out is a copy: the reply's record goes back to its
		// connection (Message's doc says when that is safe).
		releaseReply(res)
	}
	return out, nil
}

// noReply reports whether a call with opts (after the client's own) is a
// [NoReply] call.
func (c *Client[Req, Res]) noReply(opts []CallOption) bool {
	if len(opts) == 0 {
		return c.cfg.noReply
	}
	cfg := c.cfg
	cfg.mixin = slices.Clone(cfg.mixin) // never append to the client's
	for _, o := range opts {
		if o != nil {
			o.applyCall(&cfg)
		}
	}
	return cfg.noReply
}
