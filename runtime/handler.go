package runtime

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/wizardmesh/wizard/runtime/internal/patrun"
	"github.com/wizardmesh/wizard/runtime/pattern"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Handler serves the messages a pattern matches. It returns the result the
// caller receives (a protobuf message, a map, JSON bytes or any value the
// caller can decode) or an error; return an [*Error] to choose the code.
type Handler func(ctx context.Context, req Request) (any, error)

// HandlerInterceptor wraps handlers: tracing, metrics and auth live there.
type HandlerInterceptor func(next Handler) Handler

// Call describes an outgoing call to a [CallInterceptor].
type Call struct {
	// Pattern is what the call routes by: for Act every routed key of the
	// message, for ActE the pattern plus its mixins.
	Pattern pattern.Pattern
	// Msg is what the handler will receive.
	Msg     any
	NoReply bool
	// Event is set on the delivery of an event ([Node.Emit],
	// [Node.Broadcast]), which goes through the call interceptors once
	// for each group (or, for a broadcast, each node) it goes to: Pattern
	// is then the event's pairs that the subscriptions it goes to test,
	// and Group the group ("" for a broadcast). An interceptor may add
	// metadata to the ctx it passes on, as for a call; the Result is
	// empty.
	Event bool
	Group string

	cfg  *callConfig    // the call's options (Default, Timeout), if made by a Node
	over *cachedPattern // Act with a protobuf message: the pattern pairs Request.Get sees
}

// Invoker performs a call; [CallInterceptor]s wrap it.
type Invoker func(ctx context.Context, call *Call) (Result, error)

// CallInterceptor wraps the calls a node makes.
type CallInterceptor func(next Invoker) Invoker

// Request is what a [Handler] receives: the message and the pattern that
// matched it.
type Request struct {
	msg   any
	over  *cachedPattern // Act on a caller's map: the pattern pairs that overlay it
	entry *handlerEntry
	node  *Node
}

// Msg returns the message: for [Node.Act] with a map or JSON, a
// map[string]any holding the message's fields and the pattern's pairs (a new
// map: the caller's is never modified); for Act with a protobuf message, the
// message itself; for [Node.ActE] the data alone, as sent. To read single
// fields, [Request.Get] is cheaper.
func (r Request) Msg() any {
	msg := r.msg
	switch m := msg.(type) {
	case *raw:
		msg = m.value()
	case *serverStream:
		return nil // a stream's Request, which interceptors see: its messages come by Recv
	}
	if r.over != nil {
		if m, ok := msg.(map[string]any); ok {
			return merged(m, r.over)
		}
	}
	return msg
}

// Get returns the message's root field key (for [Node.Act], the pattern's
// pairs included, as strings), or nil. A field of a map or JSON message is
// what JSON decoding gives, in-process as remotely: numbers are float64,
// objects map[string]any, arrays []any (a caller's map[string]any{"a": 1}
// reads 1.0; values of other types are converted, at a cost). Protobuf
// fields are read by their proto name, as their protoreflect values (an
// int32 field is an int32). To read a number, a string or a boolean
// whatever its form, use [Request.Float64], [Request.Int64],
// [Request.String] or [Request.Bool]: they allocate nothing.
func (r Request) Get(key string) any {
	v, asIs := r.field(key)
	if asIs {
		return v
	}
	return jsonValue(v)
}

// field is the message's root field key as the message holds it, and
// whether it is a protobuf field's value (Get leaves those as they are).
func (r Request) field(key string) (any, bool) {
	if r.over != nil {
		for i, pr := range patrun.PairsOf(r.over.pattern) {
			if pr.Key == key {
				return r.over.values[i], false
			}
		}
	}
	msg := r.msg
	if rw, ok := msg.(*raw); ok {
		msg = rw.value()
	}
	switch m := msg.(type) {
	case map[string]any:
		return m[key], false
	case map[string]string:
		if v, ok := m[key]; ok {
			return v, false
		}
	case proto.Message:
		pm := m.ProtoReflect()
		if fd := pm.Descriptor().Fields().ByName(protoreflect.Name(key)); fd != nil && pm.Has(fd) {
			return pm.Get(fd).Interface(), true
		}
	case []byte, json.RawMessage:
		if b, err := toJSON(m); err == nil {
			if mm, err := parseJSON(b); err == nil {
				return mm[key], false
			}
		}
	}
	return nil, false
}

// Pattern returns the pattern the handler was added with.
func (r Request) Pattern() pattern.Pattern {
	if r.entry == nil {
		return pattern.Pattern{}
	}
	return r.entry.pattern
}

// Decode stores the message into dst, a pointer: to a protobuf message, a
// struct (through JSON), a map, or any value the message is assignable to.
//
// For [Node.Act], it decodes what [Request.Get] reads: a map or JSON
// message overlaid with the pattern's pairs; a protobuf message as it is
// (whose fields never contradict the pattern: Act refuses such a message).
func (r Request) Decode(dst any) error {
	if r.over == nil {
		return decode(r.msg, dst) // a remote payload decodes straight into dst
	}
	if rw, ok := r.msg.(*raw); ok && rw.codec != CodecJSON {
		return decode(r.msg, dst)
	}
	return decode(r.Msg(), dst)
}

// Prior calls the handler this one overrode (see [Override]) with msg, in
// the same goroutine. Without a prior it returns a [CodeNotFound] error.
func (r Request) Prior(ctx context.Context, msg any) (any, error) {
	if r.entry == nil || r.entry.prior == nil {
		return nil, Errorf(CodeNotFound, "wizard: no prior handler for %q", r.Pattern().String())
	}
	return r.node.serve(ctx, r.entry.prior, Request{msg: msg, entry: r.entry.prior, node: r.node})
}

// NewUnaryHandler adapts a typed function to a [Handler]; generated code
// registers handlers through it. When the caller sends a *Req (the
// in-process typed path) the function receives it as is; maps and JSON
// are decoded into a new Req (through protojson when Req is a protobuf
// message).
//
// A protobuf message of another type than Req is refused
// ([CodeInvalidArgument], naming both types): never decoded into an empty
// or half-filled Req.
func NewUnaryHandler[Req, Res any](fn func(context.Context, *Req) (*Res, error)) Handler {
	if fn == nil {
		return nil
	}
	want := protoName[Req]()
	h := func(ctx context.Context, r Request) (any, error) {
		in, ok := r.msg.(*Req)
		if !ok || in == nil {
			if got := messageType(r.msg); want != "" && got != "" && got != want {
				return nil, errWrongRequest(r.Pattern().String(), want, got)
			}
			in = new(Req)
			if err := r.Decode(in); err != nil {
				return nil, err
			}
			if rw, ok := r.msg.(*raw); ok && rw.call != nil && want != "" {
				// A protobuf message decodes into copies of the bytes
				// and strings: fn gets nothing of the call.
				rw.call.copied = true
			}
		}
		out, err := fn(ctx, in)
		if err != nil || out == nil {
			return nil, err
		}
		return out, nil
	}
	unaryCode.Store(reflect.ValueOf(h).Pointer(), true)
	return h
}

// unaryCode holds the code of the handlers NewUnaryHandler makes (one per
// instantiation's shape), so that Add knows a handler that gives fn a
// copy of the request and keeps nothing of the call (see Message.copied)
// from any other, a handler that wraps one included.
var unaryCode sync.Map // uintptr → true

// isUnary reports whether h is a handler NewUnaryHandler made.
func isUnary(h Handler) bool {
	_, ok := unaryCode.Load(reflect.ValueOf(h).Pointer())
	return ok
}

// route is the router's value for a pattern: the local handler, if any
// (replaced atomically by [Override]), and the remote peers serving the same
// pattern (copy on write). A local handler is preferred.
type route struct {
	pattern pattern.Pattern
	local   atomic.Pointer[handlerEntry]
	peers   atomic.Pointer[[]*peer]     // for introspection; calls go through bal
	bal     atomic.Pointer[balancerBox] // set with the first peer
	// types is the request and response types every peer of the route
	// lists for it in its catalog, nil when one lists none or they
	// differ: a caller refuses to send another protobuf type.
	types atomic.Pointer[typeNames]
}

func (r *route) hasPeers() bool {
	ps := r.peers.Load()
	return ps != nil && len(*ps) > 0
}

// handlerEntry is one added handler.
type handlerEntry struct {
	pattern pattern.Pattern
	h       Handler // wrapped by the node's handler interceptors
	unary   bool    // h is NewUnaryHandler's, unwrapped: it keeps nothing of a call
	stream  bool    // h is NewStreamHandler's (perhaps wrapped): it serves streams, not calls
	prior   *handlerEntry
	spec    *Spec // Method, if given
	// group is a subscription's group ([Node.Subscribe]), "" for a
	// handler; wire is its pattern in catalogs (subscriptionPattern).
	group string
	wire  pattern.Pattern
	types typeNames // of spec: what the node checks and lists in its catalog
}
