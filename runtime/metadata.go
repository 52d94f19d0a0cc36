package runtime

import (
	"context"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// Metadata is a call's metadata, as gRPC metadata and connect headers
// are: key/value pairs beside the message, for trace context,
// credentials, request ids and the like. Keys are lower-case ASCII
// (letters, digits, '-', '_' and '.'); a key may repeat. Values are
// strings of printable text; a key ending in "-bin" holds any bytes.
//
// A caller attaches metadata to the calls it makes with ctx through
// [AppendMetadata] or [WithMetadata]; a handler reads what its caller sent
// with [IncomingMetadata]. Metadata a handler received does not flow into
// the calls the handler makes (its ctx carries no outgoing metadata) unless
// it copies it: WithMetadata(ctx, IncomingMetadata(ctx)). In-process and
// remote calls behave alike.
//
// The zero Metadata is empty. A Metadata is read-only: the functions that
// add to it return a new one.
type Metadata struct {
	pairs []MetaPair // may hold the node's own pairs (keys starting with ':'), which it hides
}

// maxMetadataSize bounds the metadata of one call: its keys' and values'
// bytes together. A call over it fails with [CodeResourceExhausted]
// before it is sent.
const maxMetadataSize = 8 << 10

// Get returns the first value of key, or "".
func (md Metadata) Get(key string) string {
	if isSystemKey(key) {
		return ""
	}
	for _, p := range md.pairs {
		if p.Key == key {
			return p.Value
		}
	}
	return ""
}

// Values returns every value of key, in the order they were added.
func (md Metadata) Values(key string) []string {
	if isSystemKey(key) {
		return nil
	}
	var vs []string
	for _, p := range md.pairs {
		if p.Key == key {
			vs = append(vs, p.Value)
		}
	}
	return vs
}

// All yields every key and value, in the order they were added.
func (md Metadata) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, p := range md.pairs {
			if isSystemKey(p.Key) {
				continue
			}
			if !yield(p.Key, p.Value) {
				return
			}
		}
	}
}

// Len returns the number of pairs.
func (md Metadata) Len() int {
	n := 0
	for _, p := range md.pairs {
		if !isSystemKey(p.Key) {
			n++
		}
	}
	return n
}

// String returns md as key=value pairs, for logs; "-bin" values are
// given as their length.
func (md Metadata) String() string {
	var b strings.Builder
	for k, v := range md.All() {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte('=')
		if strings.HasSuffix(k, "-bin") {
			b.WriteString("(" + strconv.Itoa(len(v)) + " bytes)")
		} else {
			b.WriteString(strconv.Quote(v))
		}
	}
	return b.String()
}

// isSystemKey reports a key of the node's own metadata (the caller's id,
// the payload's type, the call's id): never a caller's to set or a
// handler's to see as metadata.
func isSystemKey(k string) bool { return len(k) > 0 && k[0] == ':' }

// metaState is what a ctx carries under metaKey: the metadata of calls
// made with it, and, in a handler, what its caller sent.
type metaState struct {
	out Metadata // for calls made with the ctx
	in  Metadata // what the handler's caller sent
	err error    // a misuse of AppendMetadata, reported by the call
}

type metaKey struct{}

// metadataUsed is set before the first ctx carrying a metaState is made:
// until then no ctx has one, and in-process calls skip looking (the
// lookup is a visible share of the in-process fast path).
var metadataUsed atomic.Bool

func metaStateOf(ctx context.Context) *metaState {
	if ctx == nil {
		return nil
	}
	st, _ := ctx.Value(metaKey{}).(*metaState)
	return st
}

// AppendMetadata returns a copy of ctx whose calls carry kv (key, value,
// key, value, …) after the metadata ctx already gives them. Keys and sizes
// are checked when a call is made: a bad key, an odd number of strings or
// more than 8 KiB fails the call ([CodeInvalidArgument],
// [CodeResourceExhausted]), naming what is wrong.
func AppendMetadata(ctx context.Context, kv ...string) context.Context {
	st := metaStateOf(ctx)
	// The ctx, its state and room for a few pairs in one allocation.
	c := &metaContext{Context: ctx}
	next := &c.st
	if st != nil {
		*next = *st
	}
	if len(kv)%2 != 0 && next.err == nil {
		next.err = Errorf(CodeInvalidArgument, "wizard: AppendMetadata: %d strings, not key/value pairs: the key %s has no value", len(kv), quoteClipped(kv[len(kv)-1], maxEchoKey))
		kv = kv[:len(kv)-1]
	}
	var pairs []MetaPair
	if n := len(next.out.pairs) + len(kv)/2; n <= len(c.room) {
		pairs = append(c.room[:0], next.out.pairs...)
	} else {
		pairs = slices.Grow(slices.Clip(next.out.pairs), len(kv)/2)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		pairs = append(pairs, MetaPair{kv[i], kv[i+1]})
	}
	next.out = Metadata{pairs}
	metadataUsed.Store(true)
	return c
}

// metaContext is a ctx carrying a metaState (AppendMetadata), with room
// for the pairs of a small metadata.
type metaContext struct {
	context.Context
	st   metaState
	room [4]MetaPair
}

func (c *metaContext) Value(key any) any {
	if key == (metaKey{}) {
		return &c.st
	}
	return c.Context.Value(key)
}

// WithMetadata returns a copy of ctx whose calls carry md, and no other
// metadata. A handler forwards what it received with
// WithMetadata(ctx, IncomingMetadata(ctx)).
func WithMetadata(ctx context.Context, md Metadata) context.Context {
	st := metaStateOf(ctx)
	next := &metaState{}
	if st != nil {
		next.in = st.in
	}
	next.out = Metadata{userPairs(md.pairs)}
	metadataUsed.Store(true)
	return context.WithValue(ctx, metaKey{}, next)
}

// userPairs returns pairs without the node's own (a view when it has
// none, else a copy).
func userPairs(pairs []MetaPair) []MetaPair {
	if !slices.ContainsFunc(pairs, func(p MetaPair) bool { return isSystemKey(p.Key) }) {
		return pairs
	}
	return slices.DeleteFunc(slices.Clone(pairs), func(p MetaPair) bool { return isSystemKey(p.Key) })
}

// OutgoingMetadata returns the metadata calls made with ctx carry.
func OutgoingMetadata(ctx context.Context) Metadata {
	if st := metaStateOf(ctx); st != nil {
		return st.out
	}
	return Metadata{}
}

// IncomingMetadata returns, in a handler (and in what it calls with its
// ctx), the metadata its caller sent; elsewhere it is empty.
func IncomingMetadata(ctx context.Context) Metadata {
	if st := metaStateOf(ctx); st != nil {
		return st.in
	}
	return Metadata{}
}

// handlerContext is a handler's ctx when its call came with metadata (or
// the caller's ctx had some): the incoming metadata, and no outgoing.
type handlerContext struct {
	context.Context
	st metaState
}

func (c *handlerContext) Value(key any) any {
	if key == (metaKey{}) {
		return &c.st
	}
	return c.Context.Value(key)
}

// inProcessContext is the ctx an in-process handler runs with: ctx itself
// when it carries no metadata state (nothing allocated), else one whose
// incoming metadata is what the call sends and whose outgoing is none. A
// misused or oversized outgoing metadata fails the call.
func inProcessContext(ctx context.Context) (context.Context, error) {
	st := metaStateOf(ctx)
	if st == nil || len(st.out.pairs) == 0 && len(st.in.pairs) == 0 && st.err == nil {
		return ctx, nil
	}
	if err := checkOutgoing(st); err != nil {
		return nil, err
	}
	return &handlerContext{Context: ctx, st: metaState{in: st.out}}, nil
}

// remoteContext is the ctx a handler of the remote call m runs with: ctx
// itself when m carries no metadata of its caller's, else one carrying it.
func remoteContext(ctx context.Context, m *Message) context.Context {
	for _, p := range m.Meta {
		if !isSystemKey(p.Key) {
			metadataUsed.Store(true)
			return &handlerContext{Context: ctx, st: metaState{in: Metadata{m.Meta}}}
		}
	}
	return ctx
}

// checkOutgoing checks the metadata a call is about to carry.
func checkOutgoing(st *metaState) error {
	if st.err != nil {
		return st.err
	}
	size := 0
	for _, p := range st.out.pairs {
		if err := checkMetaPair(p); err != nil {
			return err
		}
		size += len(p.Key) + len(p.Value)
	}
	if size > maxMetadataSize {
		return Errorf(CodeResourceExhausted, "wizard: the call's metadata holds %d bytes, more than the limit of %d", size, maxMetadataSize)
	}
	return nil
}

// maxMetaKey bounds a metadata key's length.
const maxMetaKey = 128

// checkMetaPair reports a key or value metadata cannot carry.
func checkMetaPair(p MetaPair) error {
	k := p.Key
	if k == "" {
		return Errorf(CodeInvalidArgument, "wizard: metadata with an empty key")
	}
	if len(k) > maxMetaKey {
		return Errorf(CodeInvalidArgument, "wizard: metadata key %s is %d bytes, more than %d", quoteClipped(k, maxEchoKey), len(k), maxMetaKey)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' && i > 0 {
			continue
		}
		return Errorf(CodeInvalidArgument, "wizard: metadata key %s: keys are lower-case ASCII letters, digits, '-', '_' and '.' (byte %d is %q)", quoteClipped(k, maxEchoKey), i, c)
	}
	if strings.HasSuffix(k, "-bin") {
		return nil
	}
	for i := 0; i < len(p.Value); i++ {
		if c := p.Value[i]; c < 0x20 || c == 0x7f {
			return Errorf(CodeInvalidArgument, "wizard: metadata %s: byte %d of its value is the control character %q (a key ending in \"-bin\" holds any bytes)", quoteClipped(k, maxEchoKey), i, c)
		}
	}
	return nil
}
