package runtime

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"

	"github.com/wizardmesh/wizard/runtime/internal/eventhook"
	"github.com/wizardmesh/wizard/runtime/internal/patrun"
	"google.golang.org/protobuf/proto"
)

// The side of events that engines outside the package use (see package
// eventhook): subscriptions they deliver to, run as served calls.

func init() {
	eventhook.NewSub = func(node any, pattern, group string, h any) (eventhook.Sub, error) {
		return node.(*Node).newEngineSub(pattern, group, h.(Handler))
	}
	eventhook.Match = func(subs []eventhook.Sub, pattern string) ([]eventhook.Sub, any) {
		p, err := patrun.Parse(pattern)
		if err != nil {
			return nil, nil
		}
		pairs := patrun.PairsOf(p)
		var matched []eventhook.Sub
		for _, s := range subs {
			if patrun.Matches(s.(*handlerEntry).pattern, pairs) {
				matched = append(matched, s)
			}
		}
		return matched, p
	}
	eventhook.Run = func(ctx context.Context, node any, subs []eventhook.Sub, ev *eventhook.Event) error {
		es := make([]*handlerEntry, len(subs))
		for i, s := range subs {
			es[i] = s.(*handlerEntry)
		}
		return node.(*Node).runEngineEvent(ctx, es, ev)
	}
	eventhook.Encode = func(ctx context.Context, node any, pattern string, msg any) (string, uint8, []byte, [][2]string, error) {
		return node.(*Node).encodeEvent(ctx, pattern, msg)
	}
}

// maxEventValue bounds the values of the pairs an engine's event pattern
// carries (Encode).
const maxEventValue = 256

// newEngineSub is a subscription an engine delivers to: checked as
// Subscribe checks one, wrapped by the node's handler interceptors, kept
// out of the node's catalog.
func (n *Node) newEngineSub(pattern, group string, h Handler) (*handlerEntry, error) {
	p, err := patrun.Parse(pattern)
	if err != nil {
		return nil, err
	}
	if group == "" {
		group = n.service
	}
	if err := checkGroup(group); err != nil {
		return nil, Errorf(CodeInvalidArgument, "wizard: subscription %q in %q: %v", p.String(), group, err)
	}
	if h == nil {
		return nil, Errorf(CodeInvalidArgument, "wizard: subscription %q in %q: nil handler", p.String(), group)
	}
	if isStreamHandler(h) {
		return nil, Errorf(CodeInvalidArgument, "wizard: subscription %q in %q: a stream handler cannot take events", p.String(), group)
	}
	for i := len(n.handlerICs) - 1; i >= 0; i-- {
		h = n.handlerICs[i](h)
	}
	return &handlerEntry{pattern: p, h: h, group: group, wire: subscriptionPattern(p, group)}, nil
}

// runEngineEvent runs subs on ev as a served call: once per ev's key in
// the de-duplication table, when the node keeps one.
func (n *Node) runEngineEvent(ctx context.Context, subs []*handlerEntry, ev *eventhook.Event) error {
	if len(subs) == 0 {
		return errors.New("wizard: no subscription to run the event on")
	}
	m := &Message{Pattern: ev.Pattern, Codec: Codec(ev.Codec), Payload: ev.Payload, Meta: make([]MetaPair, len(ev.Meta))}
	for i, kv := range ev.Meta {
		m.Meta[i] = MetaPair{kv[0], kv[1]}
	}
	if err := n.limits.checkMeta(m.Meta); err != nil {
		return err
	}
	// Parsed, not cached (see servedEvent), and without the limits on
	// patterns from other nodes: Encode made it, within its bounds.
	var err error
	p, ok := ev.Parsed.(patrun.Pattern)
	if !ok {
		if p, err = patrun.Parse(ev.Pattern); err != nil {
			return err
		}
	}
	e := n.eventEntry(p, subs)
	var over *cachedPattern
	if o := metaValue(m.Meta, metaOver); o != "" {
		if over, err = n.wireTarget(o); err != nil {
			return err
		}
		if err := overlaid(m, over); err != nil {
			return err
		}
	}
	var reply *Message
	if n.dedup != nil && ev.Source != "" {
		k := engineKey(ev.Source, ev.Group)
		reply = n.serveOnce(ctx, m, e, over, k, ev.Seq, false)
	} else {
		reply = n.serveLocal(ctx, m, e, over)
	}
	if reply == nil || reply.Code == CodeOK {
		return nil
	}
	failed := &Error{Code: reply.Code, Message: reply.Error}
	if reply.Flags&FlagRefused != 0 {
		failed.cause = eventhook.ErrRefused // not run: closing or over its in-flight limit
	}
	return failed
}

// encodeEvent encodes msg, emitted with pattern, as an engine carries it.
func (n *Node) encodeEvent(ctx context.Context, pattern string, msg any) (string, uint8, []byte, [][2]string, error) {
	t, err := n.parsed.get(pattern)
	if err != nil {
		return "", 0, nil, nil, err
	}
	var buf [16]patrun.Pair
	pairs, body, over, err := actMessage(buf[:0], t, msg)
	if err != nil {
		return "", 0, nil, nil, err
	}
	if m, ok := body.(map[string]any); ok && over != nil {
		body, over = merged(m, over), nil
	}
	codec, payload, typ, rb, err := encodeRequest(body)
	if err != nil {
		return "", 0, nil, nil, err
	}
	if rb.m != nil {
		if payload, err = proto.Marshal(rb.m); err != nil {
			return "", 0, nil, nil, err
		}
	}
	var meta [][2]string
	if typ != "" {
		meta = append(meta, [2]string{metaType, typ})
	}
	if over != nil {
		meta = append(meta, [2]string{metaOver, over.pattern.String()})
	}
	if st := metaStateOf(ctx); st != nil {
		if err := checkOutgoing(st); err != nil {
			return "", 0, nil, nil, err
		}
		for _, p := range st.out.pairs {
			meta = append(meta, [2]string{p.Key, p.Value})
		}
	}
	// The event's pattern: its pairs but those whose values are longer
	// than maxEventValue (text, not something a subscription tests),
	// which travel in the payload only.
	kept := pairs[:0]
	for _, pr := range pairs {
		if len(pr.Value) <= maxEventValue {
			kept = append(kept, pr)
		}
	}
	return string(patrun.AppendCanonical(nil, kept)), uint8(codec), payload, meta, nil
}

// engineKeys are the de-duplication callers of engines' events, by
// source and group: hashed once each (an engine has a few).
var engineKeys sync.Map // [2]string -> callerKey

// engineKey is the de-duplication caller of the events of source for
// group.
func engineKey(source, group string) callerKey {
	if k, ok := engineKeys.Load([2]string{source, group}); ok {
		return k.(callerKey)
	}
	k := callerKey{identity: sha256.Sum256([]byte("event\x00" + source + "\x00" + group)), verified: true}
	engineKeys.Store([2]string{source, group}, k)
	return k
}
