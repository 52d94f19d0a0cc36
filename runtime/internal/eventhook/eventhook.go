// Package eventhook lets an event engine outside package runtime (the
// durable events of runtime/nats/durable) run a node's subscriptions as
// the node runs those an emitter reaches over the mesh: with the node's
// handler interceptors, its observer, its in-flight accounting and its
// de-duplication table. Package runtime sets its functions when it is
// initialised; they are nil before.
package eventhook

import (
	"context"
	"errors"
)

// Event is an event an engine hands to a node.
type Event struct {
	// Pattern is the event's pattern: the pairs it was emitted with, in
	// canonical form. The subscriptions that match it run.
	Pattern string
	// Group is the group whose subscriptions run.
	Group string
	// Codec (a runtime.Codec) and Payload are the message as an emitter
	// encoded it (Encode).
	Codec   uint8
	Payload []byte
	// Meta is the metadata it carries: the node's own that Encode
	// returned (keys starting with ':', the payload's type among them)
	// and the emitter's (trace context included), as key/value pairs.
	Meta [][2]string
	// Source names where it comes from (an engine and its event space);
	// with Group and Seq it is the key under which the node's
	// de-duplication table keeps the event: a copy with the same key
	// that arrives while the first runs waits for it, and one that
	// arrives after it finished gets its outcome without running.
	Source string
	Seq    uint64
	// Parsed is Pattern as Match parsed it, or nil: Run parses Pattern
	// then. It spares a delivery a second parse.
	Parsed any
}

// ErrRefused is the cause (errors.Is) of Run's error when the node did not
// run the event: it is shutting down or over its in-flight limit. Run
// keeps only successful outcomes in the de-duplication table, so a copy
// of a failed or refused event runs again.
var ErrRefused = errors.New("wizard: the node refused the event without running it")

// Sub is a node's subscription, made by NewSub: opaque to the engine.
type Sub any

var (
	// NewSub makes a subscription of the node (a *runtime.Node) to
	// pattern in group (the node's service when ""), with handler h (a
	// runtime.Handler), wrapped by the node's handler interceptors. It
	// is not listed in the node's catalog: the engine delivers to it.
	NewSub func(node any, pattern, group string, h any) (Sub, error)
	// Match returns those of subs whose patterns match the event pattern
	// (nil for none), parsing it once, and the pattern parsed, for
	// Event.Parsed (nil when it does not parse: then none match).
	Match func(subs []Sub, pattern string) (matched []Sub, parsed any)
	// Run runs subs (the engine's subscriptions of ev.Group that match
	// ev) on ev on the node, once per ev's key (see Event.Source), and
	// returns the first handler error. A node that is shutting down
	// refuses it (unavailable) without running it.
	Run func(ctx context.Context, node any, subs []Sub, ev *Event) error
	// Encode encodes msg with the pattern's pairs, as Node.Emit sends
	// it, into what an Event carries: its pattern, codec, payload and the
	// node's own metadata, followed by the caller's metadata in ctx.
	Encode func(ctx context.Context, node any, pattern string, msg any) (canonical string, codec uint8, payload []byte, meta [][2]string, err error)
)
