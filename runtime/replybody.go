package runtime

import (
	"context"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// A reply body is a handler's protobuf result that the node leaves to its
// transport to encode: the stream transports marshal it straight into the
// buffer of the answer's frame, after the frame's header, which spares
// the buffer proto.Marshal makes (allocated and zeroed) and the copy of
// it into the frame. The de-duplication table keeps the result itself for
// a copy of the call: a handler's result is the caller's once returned,
// as it is for a caller in the same process.
//
// Only a result whose encoding cannot fail is left unencoded (see
// plainMessage): the transport encodes it after the answer is decided,
// where an error could not be answered.

// ServeMessageBody is [BodyServer.ServeMessageBody]: the node's reply,
// its result left unencoded when it may be, and whether nothing holds m
// once the reply is encoded (a typed handler decoded a copy of the
// request, no handler interceptor had it, and the handler's context does
// not carry its metadata).
func (s nodeServer) ServeMessageBody(ctx context.Context, m *Message) (reply *Message, body proto.Message, size int, free bool) {
	m.deferBody = true
	r := s.n.serveRemote(ctx, m)
	if r == nil {
		return nil, nil, 0, false
	}
	return r, r.body, r.bodyLen, r == m && r.copied && r.Code == CodeOK
}

// replyBody is a result left to the transport to encode, and its size.
type replyBody struct {
	m proto.Message
	n int
}

// encodeReply encodes v, the result of the call m, as encodePayload does,
// or leaves it unencoded in body when m's transport encodes protobuf
// replies itself and v's encoding cannot fail.
func encodeReply(m *Message, v any) (Codec, []byte, string, replyBody, error) {
	if m.deferBody {
		if pm, ok := v.(proto.Message); ok {
			if md := pm.ProtoReflect().Descriptor(); plainMessage(md) {
				return CodecProto, nil, string(md.FullName()), replyBody{pm, proto.Size(pm)}, nil
			}
		}
	}
	codec, payload, typ, err := encodePayload(v)
	return codec, payload, typ, replyBody{}, err
}

// encodedFor returns reply, a stored answer given to a copy of the call
// m, as m's transport takes it: with its payload encoded unless the
// transport encodes the result itself.
func (n *Node) encodedFor(m *Message, reply *Message) *Message {
	if reply.body == nil || m.deferBody {
		return reply
	}
	b, err := proto.Marshal(reply.body)
	if err != nil { // plainMessage makes this unreachable
		return errorReply(errUnencodable)
	}
	r := *reply // reply may be given to other copies too
	r.Payload, r.body, r.bodyLen = b, nil, 0
	return &r
}

// plainTypes caches plainMessage by descriptor.
var plainTypes sync.Map // protoreflect.MessageDescriptor → bool

// plainMessage reports whether messages of type md always encode without
// error: every field a number, a bool, an enum or bytes (repeated or
// not), none required, and no extensions. Strings may fail (invalid
// UTF-8), required fields may be missing, and nested messages may hold
// either, so their types are encoded by the node as before.
func plainMessage(md protoreflect.MessageDescriptor) bool {
	if v, ok := plainTypes.Load(md); ok {
		return v.(bool)
	}
	plain := md.ExtensionRanges().Len() == 0
	fields := md.Fields()
	for i := 0; plain && i < fields.Len(); i++ {
		fd := fields.Get(i)
		switch fd.Kind() {
		case protoreflect.StringKind, protoreflect.MessageKind, protoreflect.GroupKind:
			plain = false
		}
		if fd.Cardinality() == protoreflect.Required || fd.IsMap() {
			plain = false
		}
	}
	plainTypes.Store(md, plain)
	return plain
}
