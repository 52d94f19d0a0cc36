package runtime

import (
	"encoding/json"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// raw is an encoded message or result received from another node. It is
// decoded when a handler or caller asks for it, into the type they ask for.
type raw struct {
	codec Codec
	data  []byte
	typ   string // protobuf full name, for CodecProto
}

// encodePayload encodes v for the wire: protobuf messages in binary, JSON
// bytes as they are, anything else as JSON.
func encodePayload(v any) (Codec, []byte, string, error) {
	switch m := v.(type) {
	case nil:
		return CodecNone, nil, "", nil
	case raw:
		return m.codec, m.data, m.typ, nil
	case proto.Message:
		b, err := proto.Marshal(m)
		if err != nil {
			return 0, nil, "", Errorf(CodeInternal, "wizard: encode %T: %v", v, err)
		}
		return CodecProto, b, string(m.ProtoReflect().Descriptor().FullName()), nil
	case []byte:
		return CodecJSON, m, "", nil
	case json.RawMessage:
		return CodecJSON, m, "", nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return 0, nil, "", Errorf(CodeInvalidArgument, "wizard: encode %T as JSON: %v", v, err)
	}
	return CodecJSON, b, "", nil
}

// value decodes r without a target type: JSON into maps, slices and
// float64s; protobuf into a message of its registered type, or the bytes
// when the type is not linked into this binary.
func (r raw) value() any {
	switch r.codec {
	case CodecNone:
		return nil
	case CodecJSON:
		var v any
		if err := json.Unmarshal(r.data, &v); err != nil {
			return r.data
		}
		return v
	case CodecProto:
		if m, err := r.message(); err == nil {
			return m
		}
	}
	return r.data
}

// message decodes a protobuf payload into a new message of its type.
func (r raw) message() (proto.Message, error) {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(r.typ))
	if err != nil {
		return nil, Errorf(CodeInvalidArgument, "wizard: protobuf payload of unknown type %q", r.typ)
	}
	m := mt.New().Interface()
	if err := proto.Unmarshal(r.data, m); err != nil {
		return nil, Errorf(CodeInvalidArgument, "wizard: decode %s: %v", r.typ, err)
	}
	return m, nil
}

// decodeRaw decodes r into dst.
func decodeRaw(r raw, dst any) error {
	switch r.codec {
	case CodecNone:
		return nil
	case CodecProto:
		if dm, ok := dst.(proto.Message); ok && (r.typ == "" || string(dm.ProtoReflect().Descriptor().FullName()) == r.typ) {
			proto.Reset(dm)
			if err := proto.Unmarshal(r.data, dm); err != nil {
				return Errorf(CodeInvalidArgument, "wizard: decode into %T: %v", dst, err)
			}
			return nil
		}
		m, err := r.message()
		if err != nil {
			return err
		}
		return decode(m, dst)
	case CodecJSON:
		if dm, ok := dst.(proto.Message); ok {
			proto.Reset(dm)
			if err := protojsonIn.Unmarshal(r.data, dm); err != nil {
				return Errorf(CodeInvalidArgument, "wizard: decode into %T: %v", dst, err)
			}
			return nil
		}
		if p, ok := dst.(*any); ok {
			*p = r.value()
			return nil
		}
		if err := json.Unmarshal(r.data, dst); err != nil {
			return Errorf(CodeInvalidArgument, "wizard: decode into %T: %v", dst, err)
		}
		return nil
	}
	return Errorf(CodeInvalidArgument, "wizard: unknown codec %d", r.codec)
}

// jsonOf returns r as JSON, for callers that want a map of a protobuf
// payload.
func (r raw) jsonOf() ([]byte, error) {
	if r.codec == CodecJSON {
		return r.data, nil
	}
	m, err := r.message()
	if err != nil {
		return nil, err
	}
	return protojson.Marshal(m)
}
