package runtime

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// raw is an encoded message or result received from another node. It is
// decoded when a handler or caller asks for it, into the type they ask for.
type raw struct {
	codec Codec
	data  []byte
	typ   string // protobuf full name, for CodecProto
	// call is, for the message of a remote call a handler serves, the
	// call it came in (which holds it): where Request.Source reads the
	// caller. A field, not one of Request's: the in-process fast path
	// passes a Request by value, and a fifth word would cost it.
	call *Message
	// types, for an answer a node received, are the types it learnt from
	// its peers (WithPeerTypes), else nil.
	types *peerTypes
	// pool is, for the view of a reply of a [ReplyReleaser], that
	// connection (see releaseReply); nil otherwise.
	pool ReplyReleaser
}

// encodePayload encodes v for the wire: protobuf messages in binary, JSON
// bytes as they are, anything else as JSON.
func encodePayload(v any) (Codec, []byte, string, error) {
	switch m := v.(type) {
	case nil:
		return CodecNone, nil, "", nil
	case *raw:
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
func (r *raw) value() any {
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
func (r *raw) message() (proto.Message, error) {
	mt, err := r.types.find(protoreflect.FullName(r.typ))
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
func decodeRaw(r *raw, dst any) error {
	switch r.codec {
	case CodecNone:
		return nil
	case CodecProto:
		if dm, ok := dst.(proto.Message); ok {
			if name := string(dm.ProtoReflect().Descriptor().FullName()); r.typ != "" && name != r.typ {
				return errOtherType(r.typ, name)
			}
			proto.Reset(dm)
			if err := proto.Unmarshal(r.data, dm); err != nil {
				return decodeError(dst, err)
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
				return decodeError(dst, err)
			}
			return nil
		}
		if p, ok := dst.(*any); ok {
			*p = r.value()
			return nil
		}
		if err := json.Unmarshal(r.data, dst); err != nil {
			return decodeError(dst, err)
		}
		return nil
	}
	return Errorf(CodeInvalidArgument, "wizard: unknown codec %d", r.codec)
}

// errOtherType refuses to decode a protobuf message of type got into one
// of type want: their fields' numbers would be read as the other's.
func errOtherType(got, want string) *Error {
	return Errorf(CodeInvalidArgument, "wizard: decode: a %s cannot be decoded into a %s", got, want)
}

// decodeError is the error of decoding a message into dst. Its message
// may reach a remote caller, so it names no Go type: a protobuf message
// by its full name, else the JSON it found and what dst wanted instead.
// The error keeps err as its local cause.
func decodeError(dst any, err error) *Error {
	into := ""
	if m, ok := dst.(proto.Message); ok {
		into = " into " + string(m.ProtoReflect().Descriptor().FullName())
	}
	return &Error{Code: CodeInvalidArgument, Message: "wizard: decode" + into + ": " + jsonReason(err), cause: err}
}

// jsonReason says why err, an error of encoding/json or of the protobuf
// decoders, failed, without the Go types encoding/json names.
func jsonReason(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	var ie *json.InvalidUnmarshalError
	switch {
	case errors.As(err, &te):
		s := "JSON " + te.Value + " where " + jsonShape(te.Type) + " is expected"
		if te.Field != "" {
			s = "field " + quoteClipped(te.Field, maxEchoKey) + ": " + s
		}
		return s
	case errors.As(err, &se):
		return "bad JSON at offset " + strconv.FormatInt(se.Offset, 10) + ": " + se.Error()
	case errors.As(err, &ie):
		return "decode needs a non-nil pointer to decode into"
	}
	return err.Error()
}

// jsonShape names the JSON a value of type t decodes from.
func jsonShape(t reflect.Type) string {
	if t == nil {
		return "nothing"
	}
	if t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return "another value"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return jsonShape(t.Elem())
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another value"
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// jsonOf returns r as JSON, for callers that want a map of a protobuf
// payload.
func (r *raw) jsonOf() ([]byte, error) {
	if r.codec == CodecJSON {
		return r.data, nil
	}
	m, err := r.message()
	if err != nil {
		return nil, err
	}
	return protojson.Marshal(m)
}

// appendDetails appends an error's details to dst as they cross the wire:
// each one a uvarint length and a google.protobuf.Any. A detail that
// cannot be encoded is left out.
func appendDetails(dst []byte, details []proto.Message) []byte {
	for _, d := range details {
		a, err := anypb.New(d)
		if err != nil {
			continue
		}
		b, err := proto.Marshal(a)
		if err != nil {
			continue
		}
		dst = binary.AppendUvarint(dst, uint64(len(b)))
		dst = append(dst, b...)
	}
	return dst
}

// decodeDetails decodes what appendDetails encoded. A detail of a type
// this binary does not register stays a *anypb.Any; malformed input ends
// the list.
func decodeDetails(b []byte) []proto.Message {
	var details []proto.Message
	for len(b) > 0 {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			break
		}
		a := new(anypb.Any)
		if err := proto.Unmarshal(b[n:n+int(l)], a); err != nil {
			break
		}
		b = b[n+int(l):]
		if m, err := a.UnmarshalNew(); err == nil {
			details = append(details, m)
		} else {
			details = append(details, a)
		}
	}
	return details
}
