package wizotel

import (
	"context"
	"strings"
	"sync"

	"github.com/wizardmesh/wizard/runtime"
	"go.opentelemetry.io/otel/propagation"
)

// inject puts the trace context of ctx into the metadata of the calls
// made with it, in place of any the metadata had (a handler that
// forwards the metadata it received forwards its caller's). With the
// default propagator the traceparent is formatted into tp, which the
// metadata's value then shares (a call's or a stream's state holds it).
func (in *instrumentation) inject(ctx context.Context, tp *traceparent) context.Context {
	if in.w3c == nil {
		return in.injectCarrier(ctx)
	}
	var buf [6]string
	kv := in.w3c.inject(ctx, tp, buf[:0])
	if len(kv) == 0 {
		return ctx
	}
	return replaceMetadata(ctx, in.w3c.fields(), kv)
}

// injectCarrier is inject through the propagator, for any other than the
// default.
func (in *instrumentation) injectCarrier(ctx context.Context) context.Context {
	c, _ := outCarriers.Get().(*outCarrier)
	if c == nil {
		c = &outCarrier{kv: make([]string, 0, 6)} // traceparent, tracestate, baggage
	}
	defer func() {
		clear(c.kv)
		c.kv = c.kv[:0]
		outCarriers.Put(c)
	}()
	in.prop.Inject(ctx, c)
	if len(c.kv) == 0 {
		return ctx
	}
	return replaceMetadata(ctx, in.prop.Fields(), c.kv)
}

// replaceMetadata returns ctx whose calls carry kv after the metadata of
// ctx but its pairs of keys.
func replaceMetadata(ctx context.Context, keys []string, kv []string) context.Context {
	if md := runtime.OutgoingMetadata(ctx); md.Len() > 0 && has(md, keys) {
		ctx = runtime.AppendMetadata(runtime.WithMetadata(ctx, runtime.Metadata{}), without(md, keys)...)
	}
	return runtime.AppendMetadata(ctx, kv...)
}

// extract returns ctx with the trace context (and baggage) of the
// metadata md a call came with.
func (in *instrumentation) extract(ctx context.Context, md runtime.Metadata) context.Context {
	if in.w3c != nil {
		return in.w3c.extract(ctx, md)
	}
	return in.prop.Extract(ctx, inCarrier{md})
}

// has reports whether md has any of keys.
func has(md runtime.Metadata, keys []string) bool {
	for _, k := range keys {
		if md.Get(strings.ToLower(k)) != "" {
			return true
		}
	}
	return false
}

// without returns the pairs of md but those of keys, as AppendMetadata
// takes them.
func without(md runtime.Metadata, keys []string) []string {
	var kv []string
	for k, v := range md.All() {
		drop := false
		for _, f := range keys {
			if strings.EqualFold(k, f) {
				drop = true
			}
		}
		if !drop {
			kv = append(kv, k, v)
		}
	}
	return kv
}

// outCarriers are reused: AppendMetadata copies what they hold.
var outCarriers sync.Pool

// outCarrier collects what a propagator injects, as metadata pairs (keys
// lower-cased, as metadata keys are).
type outCarrier struct{ kv []string }

var _ propagation.TextMapCarrier = (*outCarrier)(nil)

func (c *outCarrier) Get(key string) string {
	key = strings.ToLower(key)
	for i := 0; i+1 < len(c.kv); i += 2 {
		if c.kv[i] == key {
			return c.kv[i+1]
		}
	}
	return ""
}

func (c *outCarrier) Set(key, value string) {
	c.kv = append(c.kv, strings.ToLower(key), value)
}

func (c *outCarrier) Keys() []string {
	keys := make([]string, 0, len(c.kv)/2)
	for i := 0; i < len(c.kv); i += 2 {
		keys = append(keys, c.kv[i])
	}
	return keys
}

// inCarrier reads trace context from a call's metadata (the caller's
// interceptor put its own in place of any other).
type inCarrier struct{ md runtime.Metadata }

var _ propagation.TextMapCarrier = inCarrier{}

func (c inCarrier) Get(key string) string { return c.md.Get(strings.ToLower(key)) }

// Set does nothing: incoming metadata is read-only.
func (inCarrier) Set(string, string) {}

func (c inCarrier) Keys() []string {
	var keys []string
	for k := range c.md.All() {
		keys = append(keys, k)
	}
	return keys
}
