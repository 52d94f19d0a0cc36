package wizotel

import (
	"context"
	"unsafe"

	"github.com/wizardmesh/wizard/runtime"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The metadata keys of W3C trace context and baggage.
const (
	keyTraceparent = "traceparent"
	keyTracestate  = "tracestate"
	keyBaggage     = "baggage"
)

// traceparentLen is the length of a version-00 traceparent:
// "00-" trace id (32) "-" span id (16) "-" flags (2).
const traceparentLen = 55

// traceparent is the room a call's traceparent is formatted in: the
// metadata value points into it, so that formatting allocates nothing.
type traceparent [traceparentLen]byte

const hexDigits = "0123456789abcdef"

// format writes sc as a version-00 traceparent (keeping the sampled and
// random flags, as propagation.TraceContext does) into b, and returns it
// as a string that shares b's bytes: b must not change afterwards.
func (b *traceparent) format(sc trace.SpanContext) string {
	tid, sid := sc.TraceID(), sc.SpanID()
	b[0], b[1], b[2] = '0', '0', '-'
	i := 3
	for _, c := range tid {
		b[i], b[i+1] = hexDigits[c>>4], hexDigits[c&0xf]
		i += 2
	}
	b[i] = '-'
	i++
	for _, c := range sid {
		b[i], b[i+1] = hexDigits[c>>4], hexDigits[c&0xf]
		i += 2
	}
	f := byte(sc.TraceFlags() & (trace.FlagsSampled | trace.FlagsRandom))
	b[i], b[i+1], b[i+2] = '-', hexDigits[f>>4], hexDigits[f&0xf]
	return unsafe.String(&b[0], traceparentLen)
}

// parseTraceparent parses h as propagation.TraceContext does: a version
// (00 to fe) and, dash-separated, a trace id, a span id and flags in
// lower-case hex, nothing after the flags in version 00 but a dash (a
// later version may add fields after one), no reserved flag in version 00, and
// neither id zero. It returns the parts, or ok false.
func parseTraceparent(h string) (tid trace.TraceID, sid trace.SpanID, flags trace.TraceFlags, ok bool) {
	// 2 + 1 + 32 + 1 + 16 + 1 + 2: shorter is no traceparent; longer is
	// only a later version's, with a dash after the flags.
	if len(h) < traceparentLen || h[2] != '-' || h[35] != '-' || h[52] != '-' {
		return tid, sid, 0, false
	}
	var ver [1]byte
	bad := hexInto(ver[:], h[0:2])
	if ver[0] == 0xff {
		return tid, sid, 0, false
	}
	bad |= hexInto(tid[:], h[3:35])
	bad |= hexInto(sid[:], h[36:52])
	var f [1]byte
	bad |= hexInto(f[:], h[53:55])
	if bad&0xf0 != 0 {
		return tid, sid, 0, false
	}
	if len(h) > traceparentLen {
		// A later version's extra fields follow a dash; version 00 has
		// none (propagation.TraceContext lets a lone dash end it).
		if h[traceparentLen] != '-' || ver[0] == 0 && len(h) > traceparentLen+1 {
			return tid, sid, 0, false
		}
	}
	if ver[0] == 0 && f[0] > 3 {
		return tid, sid, 0, false
	}
	if !tid.IsValid() || !sid.IsValid() {
		return tid, sid, 0, false
	}
	return tid, sid, trace.TraceFlags(f[0]) & (trace.FlagsSampled | trace.FlagsRandom), true
}

// hexInto decodes the lower-case hex src into dst (len(src) = 2·len(dst))
// and returns a value whose high nibble is set if any digit was not
// lower-case hex.
func hexInto(dst []byte, src string) byte {
	var bad byte
	for i := range dst {
		hi, lo := unhex(src[2*i]), unhex(src[2*i+1])
		dst[i] = hi<<4 | lo
		bad |= hi | lo
	}
	return bad
}

// unhex is the value of the lower-case hex digit c, or 0xff.
func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return 0xff
}

// w3c is the propagation of the default propagator, W3C trace context
// and baggage (and of propagation.TraceContext alone, without baggage),
// done without a carrier: the traceparent is formatted into the call's
// state and parsed where the server reads it. Its keys and values are
// those propagation.TraceContext and propagation.Baggage write and read.
type w3c struct{ baggage bool }

// fields are the metadata keys w3c writes.
func (p w3c) fields() []string {
	if p.baggage {
		return w3cFields[:]
	}
	return w3cFields[:2]
}

var w3cFields = [...]string{keyTraceparent, keyTracestate, keyBaggage}

// inject returns the metadata pairs of ctx's trace context (and
// baggage), the traceparent formatted into tp, appended to kv.
func (p w3c) inject(ctx context.Context, tp *traceparent, kv []string) []string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		if ts := sc.TraceState().String(); ts != "" {
			kv = append(kv, keyTracestate, ts)
		}
		kv = append(kv, keyTraceparent, tp.format(sc))
	}
	if p.baggage {
		if b := baggage.FromContext(ctx); b.Len() > 0 {
			if s := b.String(); s != "" {
				kv = append(kv, keyBaggage, s)
			}
		}
	}
	return kv
}

// extract returns ctx with the remote span context (and baggage) md
// carries, as propagation.TraceContext and propagation.Baggage read
// them.
func (p w3c) extract(ctx context.Context, md runtime.Metadata) context.Context {
	if h := md.Get(keyTraceparent); h != "" {
		if tid, sid, flags, ok := parseTraceparent(h); ok {
			scc := trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true}
			if ts := md.Get(keyTracestate); ts != "" {
				scc.TraceState, _ = trace.ParseTraceState(ts) // a bad tracestate does not spoil the traceparent
			}
			ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(scc))
		}
	}
	if p.baggage && md.Get(keyBaggage) != "" {
		ctx = propagation.Baggage{}.Extract(ctx, inCarrier{md})
	}
	return ctx
}
