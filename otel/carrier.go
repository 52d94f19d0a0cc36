package wizotel

import (
	"context"
	"strings"

	"github.com/wizardmesh/wizard/runtime"
	"go.opentelemetry.io/otel/propagation"
)

// inject puts the trace context of ctx into the metadata of the calls
// made with it.
func (in *instrumentation) inject(ctx context.Context) context.Context {
	var buf [6]string // traceparent, tracestate, baggage
	c := outCarrier{kv: buf[:0]}
	in.prop.Inject(ctx, &c)
	if len(c.kv) == 0 {
		return ctx
	}
	return runtime.AppendMetadata(ctx, c.kv...)
}

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

// inCarrier reads trace context from a call's metadata. A key given more
// than once reads as its last value: what this node's caller added
// after metadata it forwarded.
type inCarrier struct{ md runtime.Metadata }

var _ propagation.TextMapCarrier = inCarrier{}

func (c inCarrier) Get(key string) string {
	key = strings.ToLower(key)
	v := ""
	for k, val := range c.md.All() {
		if k == key {
			v = val
		}
	}
	return v
}

// Set does nothing: incoming metadata is read-only.
func (inCarrier) Set(string, string) {}

func (c inCarrier) Keys() []string {
	var keys []string
	for k := range c.md.All() {
		keys = append(keys, k)
	}
	return keys
}
