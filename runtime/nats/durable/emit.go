package durable

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/wizardmesh/wizard/runtime/internal/eventhook"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// The headers an event carries.
const (
	// headerPattern is the event's pattern in canonical form: the pairs
	// it was emitted with and a map message's root scalar fields.
	headerPattern = "Wizard-Pattern"
	// headerCodec is the payload's codec (a runtime.Codec, in decimal).
	headerCodec = "Wizard-Codec"
	// headerMeta holds the event's metadata, one value a pair, in order:
	// key=value, both query-escaped.
	headerMeta = "Wizard-Meta"
)

// Receipt is what the stream said of an emitted event.
type Receipt struct {
	// Stream is the stream that holds the event.
	Stream string
	// Seq is the event's sequence in the stream.
	Seq uint64
	// Duplicate is true when the stream had the event's Nats-Msg-Id
	// already, within its duplicate window, and kept the first one.
	Duplicate bool
	// MsgID is the event's Nats-Msg-Id.
	MsgID string
}

// emitAttempts bounds the publications of one Emit, and emitRetryWait is
// the first wait between them, doubled each time.
const (
	emitAttempts  = 4
	emitRetryWait = 250 * time.Millisecond
)

// Emit stores an event in the space's stream, for every group whose
// subscriptions match it, and returns once the stream acknowledged it.
// msg takes the shapes [runtime.Node.Emit] takes (a map, JSON, a
// protobuf message), with pattern's pairs; the metadata in ctx
// ([runtime.AppendMetadata]), trace context included, travels with it.
//
// The event's subject is "wizard.event.<space>.<pairs>": the pairs of
// pattern (not those of the message), sorted by key, each as key:value,
// joined by '.' ("wizard.event.orders.event:placed.role:order"), with
// '.', '*', '>', '%' and spaces in them %-escaped; "_" for an empty
// pattern. It is published with a Nats-Msg-Id ([MsgID], else one made
// for this call), the same on each of this call's retries, so the stream
// keeps it once. An error means the stream may or may not hold the
// event: emitting it again with the same MsgID is safe within the
// stream's duplicate window.
func (e *Events) Emit(ctx context.Context, pat string, msg any, opts ...EmitOption) (Receipt, error) {
	var c emitConfig
	for _, o := range opts {
		if o != nil {
			o.applyEmit(&c)
		}
	}
	fail := func(err error) (Receipt, error) {
		return Receipt{}, fmt.Errorf("wizard: event space %q: Emit(%q): %w", e.space, pat, err)
	}
	subject, err := e.subjects.of(e.subject, pat)
	if err != nil {
		return fail(err)
	}
	canonical, codec, payload, meta, err := eventhook.Encode(ctx, e.node, pat, msg)
	if err != nil {
		return fail(err)
	}
	if c.msgID == "" {
		c.msgID = nuid.Next()
	}
	// The headers are set here rather than by PublishMsg's options
	// (jetstream.WithMsgID, WithExpectStream), which cost a closure each.
	h := make(natsgo.Header, 5)
	h[headerPattern] = []string{canonical}
	h[headerCodec] = []string{codecString(codec)}
	h[jetstream.MsgIDHeader] = []string{c.msgID}
	h[jetstream.ExpectedStreamHeader] = []string{e.stream}
	if len(meta) > 0 {
		vs := make([]string, len(meta))
		for i, kv := range meta {
			vs[i] = escape(kv[0]) + "=" + escape(kv[1])
		}
		h[headerMeta] = vs
	}
	m := &natsgo.Msg{Subject: subject, Data: payload, Header: h}
	wait := emitRetryWait
	for attempt := 1; ; attempt++ {
		ack, err := e.js.PublishMsg(ctx, m)
		if err == nil {
			return Receipt{Stream: ack.Stream, Seq: ack.Sequence, Duplicate: ack.Duplicate, MsgID: c.msgID}, nil
		}
		if attempt == emitAttempts || !retryable(err) || ctx.Err() != nil {
			return fail(fmt.Errorf("publishing %s (Nats-Msg-Id %s, attempt %d): %w", m.Subject, c.msgID, attempt, err))
		}
		if err := sleep(ctx, wait); err != nil {
			return fail(fmt.Errorf("publishing %s (Nats-Msg-Id %s): %w", m.Subject, c.msgID, err))
		}
		wait *= 2
	}
}

// retryable reports whether a publication that failed with err may
// succeed if sent again: the broker did not answer, or had no stream.
func retryable(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, natsgo.ErrNoResponders) ||
		errors.Is(err, natsgo.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, natsgo.ErrConnectionReconnecting) || errors.Is(err, jetstream.ErrJetStreamNotEnabled)
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// codecs are the Wizard-Codec headers of the codecs, made once.
var codecs = func() (s [256]string) {
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

func codecString(c uint8) string { return codecs[c] }

// escape is url.QueryEscape, without its copy of a string that needs no
// escaping.
func escape(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~') {
			return url.QueryEscape(s)
		}
	}
	return s
}

// subjectCache remembers the subjects of the patterns emitted, which are
// few, so that an Emit neither parses its pattern nor builds its subject
// again; it forgets them all when it holds maxSubjects.
type subjectCache struct {
	mu sync.RWMutex
	m  map[string]string
}

const maxSubjects = 1024

// of returns the subject of an event emitted with pattern pat, under the
// prefix of the events' subjects.
func (c *subjectCache) of(prefix, pat string) (string, error) {
	c.mu.RLock()
	s, ok := c.m[pat]
	c.mu.RUnlock()
	if ok {
		return s, nil
	}
	p, err := pattern.Parse(pat)
	if err != nil {
		return "", err
	}
	s = subjectOf(prefix, p)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxSubjects {
		c.m = map[string]string{}
	}
	c.m[pat] = s
	c.mu.Unlock()
	return s, nil
}

// subjectOf is the subject of an event emitted with the pattern p, under
// prefix.
func subjectOf(prefix string, p pattern.Pattern) string {
	var b strings.Builder
	b.WriteString(prefix)
	pairs := p.Pairs()
	if len(pairs) == 0 {
		b.WriteString("._")
	}
	for _, pr := range pairs {
		b.WriteByte('.')
		escapeToken(&b, pr.Key)
		b.WriteByte(':')
		escapeToken(&b, pr.Value)
	}
	return b.String()
}

// escapeToken writes s to b with what a subject token cannot hold (and
// '%') %-escaped.
func escapeToken(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.' || c == '*' || c == '>' || c == '%' || c <= ' ' || c == 0x7f:
			fmt.Fprintf(b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
}

// eventOf decodes what the headers and data of a stored event carry.
func eventOf(h natsgo.Header, data []byte) (*eventhook.Event, error) {
	canonical := h.Get(headerPattern)
	if canonical == "" {
		return nil, errors.New("no " + headerPattern + " header: not an event emitted by wizard")
	}
	codec, err := strconv.ParseUint(h.Get(headerCodec), 10, 8)
	if err != nil {
		return nil, fmt.Errorf("header %s: %v", headerCodec, err)
	}
	ev := &eventhook.Event{Pattern: canonical, Codec: uint8(codec), Payload: data}
	for _, v := range h[headerMeta] {
		k, val, ok := strings.Cut(v, "=")
		if !ok {
			return nil, fmt.Errorf("header %s: %q is not key=value", headerMeta, v)
		}
		if k, err = unescape(k); err == nil {
			val, err = unescape(val)
		}
		if err != nil {
			return nil, fmt.Errorf("header %s: %v", headerMeta, err)
		}
		ev.Meta = append(ev.Meta, [2]string{k, val})
	}
	return ev, nil
}

// unescape is url.QueryUnescape, without its copy of a string that has
// nothing escaped.
func unescape(s string) (string, error) {
	if !strings.ContainsAny(s, "%+") {
		return s, nil
	}
	return url.QueryUnescape(s)
}

// checkSubject reports what is wrong with a subject to publish to.
func checkSubject(s string) error {
	if s == "" {
		return errors.New("empty subject")
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || strings.ContainsAny(tok, "*> \t\r\n") {
			return fmt.Errorf("%q is not a subject to publish to", s)
		}
	}
	return nil
}
