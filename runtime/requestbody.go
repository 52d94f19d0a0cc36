package runtime

import (
	"context"

	"google.golang.org/protobuf/proto"
)

// A request body is a call's protobuf message that the node leaves to its
// connection to encode, as it leaves a reply body to its listener (see
// replybody.go): a connection with a CallBody method (runtime/tcp's)
// marshals it straight into the request's frame; any other gets the
// payload encoded, once, before its first attempt.

// bodyConn is a [Conn] that encodes a protobuf request itself. Neither
// its CallBody nor its Call keeps m, or anything m points to, once it
// returns, nor returns m as the reply: a node reuses a call's message
// once the call is over (see getOutMessage) when only such connections
// had it.
type bodyConn interface {
	CallBody(ctx context.Context, m *Message, body proto.Message, size int) (*Message, error)
}

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
// that follow reuse it). A reply whose record c takes back is marked
// with c (see replypool.go).
func send(ctx context.Context, c Conn, m *Message) (*Message, error) {
	reply, err := sendTo(ctx, c, m)
	if rp, ok := c.(replyPool); ok && reply != nil {
		reply.in.pool = rp
	}
	return reply, err
}

func sendTo(ctx context.Context, c Conn, m *Message) (*Message, error) {
	bc, ok := c.(bodyConn)
	if !ok {
		m.lent = true // c may keep m: it is never reused
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
