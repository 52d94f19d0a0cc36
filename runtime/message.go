package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strconv"

	"github.com/wizardmesh/wizard/runtime/internal/patrun"
	"github.com/wizardmesh/wizard/runtime/pattern"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

func unsupported(msg any) *Error {
	return Errorf(CodeInvalidArgument, "wizard: unsupported message type %T: use a map[string]any, JSON object bytes or a protobuf message", msg)
}

// parseJSON decodes a JSON object into a map, as encoding/json does
// (numbers become float64, which route in their shortest form: 2.0 is "2").
func parseJSON(b []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return map[string]any{}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, &Error{Code: CodeInvalidArgument, Message: "wizard: message is not a JSON object: " + jsonReason(err), cause: err}
	}
	if m == nil { // the JSON text null
		m = map[string]any{}
	}
	return m, nil
}

// protoPairs returns m's populated, singular scalar fields as routing pairs.
// Keys are the proto field names; enums route by value name.
func protoPairs(m protoreflect.Message) []pattern.Pair {
	var dst []pattern.Pair
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if s, ok := protoValue(fd, v); ok {
			dst = append(dst, pattern.Pair{Key: string(fd.Name()), Value: s})
		}
		return true
	})
	return dst
}

func protoField(m protoreflect.Message, key string) (string, bool) {
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(key))
	if fd == nil || !m.Has(fd) {
		return "", false
	}
	return protoValue(fd, m.Get(fd))
}

func protoValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) (string, bool) {
	if fd.Cardinality() == protoreflect.Repeated || fd.IsMap() {
		return "", false
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return strconv.FormatBool(v.Bool()), true
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return strconv.FormatInt(v.Int(), 10), true
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.FormatUint(v.Uint(), 10), true
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return patrun.FormatNumber(v.Float()), true
	case protoreflect.StringKind:
		return v.String(), true
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name()), true
		}
		return strconv.FormatInt(int64(v.Enum()), 10), true
	}
	return "", false
}

// fieldValue returns the routing value of msg's root field key.
func fieldValue(msg any, key string) (string, bool, error) {
	switch m := msg.(type) {
	case nil:
		return "", false, nil
	case map[string]any:
		s, ok := patrun.RouteValue(m[key])
		return s, ok, nil
	case map[string]string:
		s, ok := m[key]
		return s, ok, nil
	case proto.Message:
		s, ok := protoField(m.ProtoReflect(), key)
		return s, ok, nil
	case []byte:
		return jsonField(m, key)
	case json.RawMessage:
		return jsonField(m, key)
	}
	return "", false, unsupported(msg)
}

func jsonField(b []byte, key string) (string, bool, error) {
	m, err := parseJSON(b)
	if err != nil {
		return "", false, err
	}
	s, ok := patrun.RouteValue(m[key])
	return s, ok, nil
}

// actMessage builds what Act routes by and what its handler receives: msg's
// root fields overlaid with t's pairs (the pattern wins). Routed pairs are
// appended to dst, sorted. A caller's map is not copied: the returned
// overlay is t, and the handler's [Request] merges lazily.
func actMessage(dst []pattern.Pair, t *cachedPattern, msg any) ([]pattern.Pair, any, *cachedPattern, error) {
	var body map[string]any
	switch m := msg.(type) {
	case nil:
		body = make(map[string]any, t.pattern.Len())
	case map[string]any:
		// Overlay even with no pairs: the handler's Msg must be a copy.
		dst = patrun.MapPairs(dst, m)
		if t.pattern.Len() == 0 {
			return dst, m, t, nil
		}
		return overlay(dst, patrun.PairsOf(t.pattern)), m, t, nil
	case map[string]string:
		body = make(map[string]any, len(m)+t.pattern.Len())
		for k, v := range m {
			body[k] = v
		}
	case []byte:
		b, err := parseJSON(m)
		if err != nil {
			return dst, nil, nil, err
		}
		body = b
	case json.RawMessage:
		b, err := parseJSON(m)
		if err != nil {
			return dst, nil, nil, err
		}
		body = b
	case proto.Message:
		if err := contradicts(m.ProtoReflect(), t); err != nil {
			return dst, nil, nil, err
		}
		dst = append(dst, protoPairs(m.ProtoReflect())...)
		patrun.SortPairs(dst)
		// The handler gets the message as is; t lets Request.Get see the
		// pattern's pairs.
		var over *cachedPattern
		if t.pattern.Len() > 0 {
			over = t
		}
		return overlay(dst, patrun.PairsOf(t.pattern)), msg, over, nil
	default:
		return dst, nil, nil, unsupported(msg)
	}
	for i, pr := range patrun.PairsOf(t.pattern) {
		body[pr.Key] = t.values[i]
	}
	return patrun.MapPairs(dst, body), body, nil, nil
}

// contradicts reports a field of m that t's pairs overlay with another
// value: the handler would read one value through Request.Get and another
// in the message it decodes, so Act refuses such a message.
func contradicts(m protoreflect.Message, t *cachedPattern) error {
	for _, pr := range patrun.PairsOf(t.pattern) {
		if v, ok := protoField(m, pr.Key); ok && v != pr.Value {
			return Errorf(CodeInvalidArgument, "wizard: the message's field %q contradicts the pattern's value for it", pr.Key)
		}
	}
	return nil
}

// merged returns m with t's pairs set, as a new map.
func merged(m map[string]any, t *cachedPattern) map[string]any {
	out := make(map[string]any, len(m)+t.pattern.Len())
	maps.Copy(out, m)
	for i, pr := range patrun.PairsOf(t.pattern) {
		out[pr.Key] = t.values[i]
	}
	return out
}

// overlay sets over's pairs in base (both sorted), replacing shared keys.
func overlay(base, over []pattern.Pair) []pattern.Pair {
	for _, o := range over {
		i := 0
		for i < len(base) && base[i].Key < o.Key {
			i++
		}
		if i < len(base) && base[i].Key == o.Key {
			base[i].Value = o.Value
			continue
		}
		base = append(base, pattern.Pair{})
		copy(base[i+1:], base[i:])
		base[i] = o
	}
	return base
}

// decode stores src into the value dst points to, converting between Go
// values, maps, JSON and protobuf messages as needed.
func decode(src, dst any) error {
	if dst == nil {
		return Errorf(CodeInvalidArgument, "wizard: decode needs a non-nil pointer to decode into, not nil")
	}
	if r, ok := src.(*raw); ok {
		if p, ok := dst.(*any); ok {
			*p = r.value()
			return nil
		}
		return decodeRaw(r, dst)
	}
	if p, ok := dst.(*any); ok {
		*p = src
		return nil
	}
	if src == nil {
		return nil
	}
	if dm, ok := dst.(proto.Message); ok {
		if !dm.ProtoReflect().IsValid() {
			return Errorf(CodeInvalidArgument, "wizard: decode needs a non-nil pointer to decode into, not a nil %s", dm.ProtoReflect().Descriptor().FullName())
		}
		return decodeProto(src, dm)
	}
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return Errorf(CodeInvalidArgument, "wizard: decode needs a non-nil pointer to decode into")
	}
	sv := reflect.ValueOf(src)
	if sv.Type().AssignableTo(rv.Elem().Type()) {
		rv.Elem().Set(sv)
		return nil
	}
	if sv.Type() == rv.Type() && !sv.IsNil() {
		// A *T result into a *T: copy the value, unexported fields included.
		rv.Elem().Set(sv.Elem())
		return nil
	}
	data, err := toJSON(src)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, dst); err != nil {
		return decodeError(dst, err)
	}
	return nil
}

var protojsonIn = protojson.UnmarshalOptions{DiscardUnknown: true}

func decodeProto(src any, dst proto.Message) error {
	// Copy only between messages of the very same descriptor: proto.Merge
	// panics on a type of the same name built from another descriptor.
	if sm, ok := src.(proto.Message); ok {
		sd, dd := sm.ProtoReflect().Descriptor(), dst.ProtoReflect().Descriptor()
		if sd == dd {
			proto.Reset(dst)
			proto.Merge(dst, sm)
			return nil
		}
		if sd.FullName() != dd.FullName() {
			return errOtherType(string(sd.FullName()), string(dd.FullName()))
		}
	}
	data, err := toJSON(src)
	if err != nil {
		return err
	}
	proto.Reset(dst)
	if err := protojsonIn.Unmarshal(data, dst); err != nil {
		return decodeError(dst, err)
	}
	return nil
}

// toJSON encodes src as JSON; JSON bytes pass through.
func toJSON(src any) ([]byte, error) {
	switch s := src.(type) {
	case *raw:
		return s.jsonOf()
	case []byte:
		return s, nil
	case json.RawMessage:
		return s, nil
	case proto.Message:
		b, err := protojson.Marshal(s)
		if err != nil {
			// The message may have come from another node: name its
			// protobuf type, not its Go type.
			return nil, &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("wizard: encode %s as JSON: %v", s.ProtoReflect().Descriptor().FullName(), err), cause: err}
		}
		return b, nil
	}
	b, err := json.Marshal(src)
	if err != nil {
		return nil, Errorf(CodeInvalidArgument, "wizard: encode %T: %v", src, err)
	}
	return b, nil
}
