package runtime

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/wizardmesh/wizard/runtime/pattern"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The payload decoders take what another node sent: any codec, any type
// name, any bytes. The fuzz targets below check that they never panic,
// and that what they build and allocate stays proportional to the input.

// allocBound is the most a decoder may allocate for n bytes of input:
// 256 bytes a byte (a map entry or a boxed value per byte of JSON), plus
// room for the decoders' fixed costs and the fuzzing worker's own.
func allocBound(n int) uint64 { return 256*uint64(n) + 1<<20 }

// allocated runs f and returns the bytes allocated meanwhile.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// jsonNodes counts the values in v, a decoded JSON value.
func jsonNodes(v any) int {
	switch v := v.(type) {
	case map[string]any:
		n := 1
		for _, e := range v {
			n += jsonNodes(e)
		}
		return n
	case []any:
		n := 1
		for _, e := range v {
			n += jsonNodes(e)
		}
		return n
	}
	return 1
}

// fuzzTarget is a value a handler or caller decodes a payload into.
type fuzzTarget struct {
	A, B  float64
	S     string
	N     int32
	L     []string
	M     map[string]int
	Inner *fuzzTarget
}

// decodeTargets are new destinations of every kind decodeRaw handles.
func decodeTargets() []any {
	return []any{
		new(any), new(map[string]any), new(map[string]string), new(fuzzTarget),
		new([]any), new(string), new(float64), new(int), new(bool), new([]byte), new(json.RawMessage),
		new(wrapperspb.Int64Value), new(wrapperspb.StringValue), new(structpb.Struct),
		new(structpb.Value), new(structpb.ListValue), new(anypb.Any),
	}
}

// FuzzDecodePayload decodes a received payload (the lazily decoded raw
// view of codec.go) the ways a handler or caller can: without a type, into
// maps, structs and protobuf messages, field by field, as JSON.
func FuzzDecodePayload(f *testing.F) {
	f.Add(uint8(CodecJSON), "", []byte(`{"a":1,"b":[true,null,"x"],"c":{"d":1.5e3}}`))
	f.Add(uint8(CodecProto), "google.protobuf.Int64Value", []byte{8, 42})
	f.Fuzz(func(t *testing.T, codec uint8, typ string, data []byte) {
		r := &raw{codec: Codec(codec), data: data, typ: typ}
		targets := decodeTargets()
		var v any
		errs := make([]error, len(targets))
		// All of it at once: reading the allocation counters stops the world.
		a := allocated(func() {
			v = r.value()
			for i, dst := range targets {
				errs[i] = decode(r, dst)
			}
			req := Request{msg: r}
			for _, key := range []string{"a", "value", ""} {
				_ = req.Get(key)
			}
			_ = req.Msg()
		})
		if bound := uint64(len(targets)+5) * allocBound(len(data)); a > bound {
			t.Fatalf("decoding %d bytes (codec %d, type %q) allocated %d bytes, more than %d", len(data), codec, typ, a, bound)
		}
		for _, err := range errs {
			if err != nil {
				checkDecodeError(t, err)
			}
		}
		if r.codec == CodecJSON {
			if n := jsonNodes(v); n > len(data)+1 {
				t.Fatalf("value() of %d bytes made %d values", len(data), n)
			}
		}
		if m, ok := v.(proto.Message); ok {
			if n := proto.Size(m); n > 2*len(data)+16 {
				t.Fatalf("a protobuf payload of %d bytes decoded to a message of %d", len(data), n)
			}
		}
		if b, err := r.jsonOf(); err == nil && r.codec == CodecProto && !json.Valid(b) {
			t.Fatalf("jsonOf gave invalid JSON %q", b)
		}
	})
}

// checkDecodeError: a decode error is invalid_argument (or internal),
// and its message names no Go type.
func checkDecodeError(t *testing.T, err error) {
	t.Helper()
	e, ok := err.(*Error)
	if !ok || e.Code != CodeInvalidArgument && e.Code != CodeInternal {
		t.Fatalf("decode error %v (%T), want an *Error with invalid_argument", err, err)
	}
	for _, g := range []string{"Go value", "Go struct", "interface {}", "runtime.fuzzTarget", "*wrapperspb", "*structpb", "*anypb", "map[string]"} {
		if strings.Contains(e.Message, g) {
			t.Fatalf("decode error %q names a Go type (%q)", e.Message, g)
		}
	}
}

// FuzzJSONMessage reads a JSON message as Act and a handler do: parsed
// into a map, its root fields as routing pairs, a field at a time.
func FuzzJSONMessage(f *testing.F) {
	f.Add([]byte(`{"role":"math","cmd":"sum","a":1,"b":2.0}`))
	t0 := newCachedPattern(pattern.MustParse("role:math"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]any
		var err error
		if a := allocated(func() { m, err = parseJSON(data) }); a > allocBound(len(data)) {
			t.Fatalf("parseJSON of %d bytes allocated %d bytes", len(data), a)
		}
		if err != nil {
			if CodeOf(err) != CodeInvalidArgument {
				t.Fatalf("parseJSON: %v, want invalid_argument", err)
			}
			checkDecodeError(t, err)
			return
		}
		if n := jsonNodes(m); n > len(data)+1 {
			t.Fatalf("parseJSON of %d bytes made %d values", len(data), n)
		}
		pairs, _, _, err := actMessage(nil, t0, data)
		if err != nil {
			t.Fatalf("actMessage of a JSON object: %v", err)
		}
		for i, pr := range pairs {
			if i > 0 && pairs[i-1].Key >= pr.Key {
				t.Fatalf("routing pairs not sorted and unique: %q", pairs)
			}
		}
		if len(pairs) > len(m)+1 {
			t.Fatalf("%d routing pairs from %d fields", len(pairs), len(m))
		}
		for k := range m {
			if _, _, err := fieldValue(data, k); err != nil {
				t.Fatalf("fieldValue(%q): %v", k, err)
			}
		}
	})
}

// FuzzDecodeDetails decodes the details of an error as another node sent
// them.
func FuzzDecodeDetails(f *testing.F) {
	f.Add(appendDetails(nil, []proto.Message{wrapperspb.String("why"), &structpb.Struct{}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var ds []proto.Message
		if a := allocated(func() { ds = decodeDetails(b) }); a > allocBound(len(b)) {
			t.Fatalf("decodeDetails of %d bytes allocated %d bytes", len(b), a)
		}
		if len(ds) > len(b) { // a detail takes a byte at least
			t.Fatalf("%d details from %d bytes", len(ds), len(b))
		}
		for _, d := range ds {
			if d == nil || reflect.ValueOf(d).IsNil() {
				t.Fatalf("a nil detail in %v", ds)
			}
		}
		_ = fmt.Sprint(ds)
	})
}
