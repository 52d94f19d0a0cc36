package runtime

import (
	"context"

	"google.golang.org/protobuf/proto"
)

// A request body is a call's protobuf message that the node leaves to its
// connection to encode, as it leaves a reply body to its listener (see
// replybody.go): a [BodyCaller] (runtime/tcp's Conn) marshals it straight
// into the request's frame; any other Conn gets the payload encoded, once,
// before its first attempt. Who owns the call's message is [Message]'s
// rule.

// encodeRequest encodes v, the message of a call, as encodePayload does,
// or leaves it unencoded in body when its encoding cannot fail (see
// plainMessage).
func encodeRequest(v any) (Codec, []byte, string, replyBody, error) {
	if pm, ok := v.(proto.Message); ok {
		if md := pm.ProtoReflect().Descriptor(); plainMessage(md) {
			return CodecProto, nil, string(md.FullName()), replyBody{pm, proto.Size(pm)}, nil
		}
	}
	codec, payload, typ, err := encodePayload(v)
	return codec, payload, typ, replyBody{}, err
}

// send calls c with m, leaving m's unencoded message to c when c encodes
// it itself and encoding it into m's payload otherwise (the attempts
// that follow reuse it). A reply of a [ReplyReleaser] is marked with c,
// which it goes back to (see releaseReply).
func send(ctx context.Context, c Conn, m *Message) (*Message, error) {
	reply, err := sendTo(ctx, c, m)
	if rp, ok := c.(ReplyReleaser); ok && reply != nil {
		reply.in.pool = rp
	}
	return reply, err
}

func sendTo(ctx context.Context, c Conn, m *Message) (*Message, error) {
	bc, ok := c.(BodyCaller)
	if !ok {
		m.lent = true // c may keep m: it is never reused (see Message)
	}
	if m.body != nil {
		if ok {
			return bc.CallBody(ctx, m, m.body, m.bodyLen)
		}
		b, err := proto.Marshal(m.body)
		if err != nil { // plainMessage makes this unreachable
			return nil, Errorf(CodeInternal, "wizard: encode %s: %v", m.body.ProtoReflect().Descriptor().FullName(), err)
		}
		m.Payload, m.body, m.bodyLen = b, nil, 0
	}
	return c.Call(ctx, m)
}
