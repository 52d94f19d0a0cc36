package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
)

// No generated code exists yet, so the tests build their protobuf message
// type from a descriptor and use it through dynamicpb:
//
//	syntax = "proto3";
//	package wizardtest.v1;
//	enum Kind { KIND_UNSPECIFIED = 0; KIND_FAST = 1; }
//	message Sum {
//	  string role = 1; string cmd = 2; double a = 3; double b = 4;
//	  int32 n = 5; bool ok = 6; Kind kind = 7; repeated string tags = 8;
//	}
var sumDesc = buildMessageDesc(&descriptorpb.FileDescriptorProto{
	Name:    proto.String("wizardtest/v1/sum.proto"),
	Package: proto.String("wizardtest.v1"),
	Syntax:  proto.String("proto3"),
	EnumType: []*descriptorpb.EnumDescriptorProto{{
		Name: proto.String("Kind"),
		Value: []*descriptorpb.EnumValueDescriptorProto{
			{Name: proto.String("KIND_UNSPECIFIED"), Number: proto.Int32(0)},
			{Name: proto.String("KIND_FAST"), Number: proto.Int32(1)},
		},
	}},
	MessageType: []*descriptorpb.DescriptorProto{{
		Name: proto.String("Sum"),
		Field: []*descriptorpb.FieldDescriptorProto{
			protoField("role", 1, descriptorpb.FieldDescriptorProto_TYPE_STRING),
			protoField("cmd", 2, descriptorpb.FieldDescriptorProto_TYPE_STRING),
			protoField("a", 3, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE),
			protoField("b", 4, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE),
			protoField("n", 5, descriptorpb.FieldDescriptorProto_TYPE_INT32),
			protoField("ok", 6, descriptorpb.FieldDescriptorProto_TYPE_BOOL),
			{
				Name:     proto.String("kind"),
				Number:   proto.Int32(7),
				Label:    descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
				Type:     descriptorpb.FieldDescriptorProto_TYPE_ENUM.Enum(),
				TypeName: proto.String(".wizardtest.v1.Kind"),
			},
			{
				Name:   proto.String("tags"),
				Number: proto.Int32(8),
				Label:  descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum(),
				Type:   descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(),
			},
		},
	}},
}, "Sum")

// otherStringValueDesc is a second, independently built descriptor named
// google.protobuf.StringValue: what a dynamic client that loaded the type
// from elsewhere holds. It is not the descriptor of wrapperspb.StringValue.
var otherStringValueDesc = buildMessageDesc(&descriptorpb.FileDescriptorProto{
	Name:    proto.String("elsewhere/wrappers.proto"),
	Package: proto.String("google.protobuf"),
	Syntax:  proto.String("proto3"),
	MessageType: []*descriptorpb.DescriptorProto{{
		Name:  proto.String("StringValue"),
		Field: []*descriptorpb.FieldDescriptorProto{protoField("value", 1, descriptorpb.FieldDescriptorProto_TYPE_STRING)},
	}},
}, "StringValue")

func protoField(name string, num int32, typ descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto {
	return &descriptorpb.FieldDescriptorProto{
		Name:   proto.String(name),
		Number: proto.Int32(num),
		Label:  descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
		Type:   typ.Enum(),
	}
}

func buildMessageDesc(fdp *descriptorpb.FileDescriptorProto, name string) protoreflect.MessageDescriptor {
	fd, err := protodesc.NewFile(fdp, nil)
	if err != nil {
		panic(err)
	}
	return fd.Messages().ByName(protoreflect.Name(name))
}

// newSum returns a wizardtest.v1.Sum with the given fields set. Values are
// string, float64, int32, bool, protoreflect.EnumNumber or []string.
func newSum(fields map[string]any) *dynamicpb.Message {
	m := dynamicpb.NewMessage(sumDesc)
	for k, v := range fields {
		fd := sumDesc.Fields().ByName(protoreflect.Name(k))
		if fd == nil {
			panic("newSum: no field " + k)
		}
		switch v := v.(type) {
		case []string:
			l := m.Mutable(fd).List()
			for _, s := range v {
				l.Append(protoreflect.ValueOfString(s))
			}
		case protoreflect.EnumNumber:
			m.Set(fd, protoreflect.ValueOfEnum(v))
		default:
			m.Set(fd, protoreflect.ValueOf(v))
		}
	}
	return m
}

// replyMsg returns a handler that answers v.
func replyMsg(v any) runtime.Handler {
	return func(context.Context, runtime.Request) (any, error) { return v, nil }
}

type point struct {
	X, Y int
	Tag  string `json:"tag"`
}

func TestResult_ValueAndDecode(t *testing.T) {
	pt := point{X: 1, Y: 2, Tag: "t"}
	ptPtr := &point{X: 3, Y: 4}
	sv := wrapperspb.String("hello")
	sum := newSum(map[string]any{"role": "math", "a": 1.5, "n": int32(7)})
	st, err := structpb.NewStruct(map[string]any{"x": 1.0, "s": "str"})
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		result any                       // what the handler returns
		dst    func() any                // a new pointer to decode into
		want   any                       // *dst after Decode
		opts   []cmp.Option              // for comparing
		check  func(t *testing.T, d any) // extra checks on *dst
	}{
		{
			name:   "same struct type is assigned",
			result: pt,
			dst:    func() any { return new(point) },
			want:   pt,
		},
		{
			name:   "same pointer type is assigned",
			result: ptPtr,
			dst:    func() any { return new(*point) },
			want:   ptPtr,
			check: func(t *testing.T, d any) {
				if d.(*point) != ptPtr {
					t.Error("Decode into **point copied the pointer's target; want the same pointer")
				}
			},
		},
		{
			name:   "pointer into struct through JSON",
			result: ptPtr,
			dst:    func() any { return new(point) },
			want:   *ptPtr,
		},
		{
			name:   "into *any",
			result: ptPtr,
			dst:    func() any { return new(any) },
			want:   any(ptPtr),
		},
		{
			name:   "map into struct through JSON",
			result: map[string]any{"X": 5, "Y": 6, "tag": "m"},
			dst:    func() any { return new(point) },
			want:   point{X: 5, Y: 6, Tag: "m"},
		},
		{
			name:   "JSON bytes into struct",
			result: []byte(`{"X": 7, "tag": "j"}`),
			dst:    func() any { return new(point) },
			want:   point{X: 7, Tag: "j"},
		},
		{
			name:   "json.RawMessage into map",
			result: json.RawMessage(`{"a": 1, "b": [true]}`),
			dst:    func() any { return new(map[string]any) },
			want:   map[string]any{"a": 1.0, "b": []any{true}},
		},
		{
			name:   "struct into map",
			result: pt,
			dst:    func() any { return new(map[string]any) },
			want:   map[string]any{"X": 1.0, "Y": 2.0, "tag": "t"},
		},
		{
			name:   "map into map is assigned",
			result: map[string]any{"k": "v"},
			dst:    func() any { return new(map[string]any) },
			want:   map[string]any{"k": "v"},
		},
		{
			name:   "proto into the same proto type",
			result: sv,
			dst:    func() any { return new(wrapperspb.StringValue) },
			want:   wrapperspb.String("hello"),
			opts:   []cmp.Option{protocmp.Transform()},
			check: func(t *testing.T, d any) {
				d.(*wrapperspb.StringValue).Value = "changed"
				if sv.Value != "hello" {
					t.Error("Decode shared the handler's message; want a copy")
				}
			},
		},
		{
			name:   "dynamic proto into a dynamic proto of its type",
			result: sum,
			dst:    func() any { return dynamicpb.NewMessage(sumDesc) },
			want:   newSum(map[string]any{"role": "math", "a": 1.5, "n": int32(7)}),
			opts:   []cmp.Option{protocmp.Transform()},
		},
		{
			name:   "map into proto",
			result: map[string]any{"role": "math", "a": 2, "n": 3, "kind": "KIND_FAST", "unknown": "dropped"},
			dst:    func() any { return dynamicpb.NewMessage(sumDesc) },
			want:   newSum(map[string]any{"role": "math", "a": 2.0, "n": int32(3), "kind": protoreflect.EnumNumber(1)}),
			opts:   []cmp.Option{protocmp.Transform()},
		},
		{
			name:   "JSON into proto",
			result: []byte(`{"cmd": "sum", "b": 0.5, "tags": ["x", "y"]}`),
			dst:    func() any { return dynamicpb.NewMessage(sumDesc) },
			want:   newSum(map[string]any{"cmd": "sum", "b": 0.5, "tags": []string{"x", "y"}}),
			opts:   []cmp.Option{protocmp.Transform()},
		},
		{
			name:   "map into structpb.Struct",
			result: map[string]any{"x": 1, "s": "str"},
			dst:    func() any { return new(structpb.Struct) },
			want:   st,
			opts:   []cmp.Option{protocmp.Transform()},
		},
		{
			name:   "proto into a map",
			result: sum,
			dst:    func() any { return new(map[string]any) },
			want:   map[string]any{"role": "math", "a": 1.5, "n": 7.0},
		},
		{
			name:   "generated proto into a dynamic proto of the same descriptor",
			result: wrapperspb.String("gen"),
			dst:    func() any { return dynamicpb.NewMessage(sv.ProtoReflect().Descriptor()) },
			want: func() proto.Message {
				m := dynamicpb.NewMessage(sv.ProtoReflect().Descriptor())
				m.Set(m.Descriptor().Fields().ByName("value"), protoreflect.ValueOfString("gen"))
				return m
			}(),
			opts: []cmp.Option{protocmp.Transform()},
		},
		{
			// Same full name, different descriptor: a copy by reflection
			// would panic, so the value must go through JSON.
			name: "dynamic proto into a generated proto with the same name",
			result: func() proto.Message {
				m := dynamicpb.NewMessage(otherStringValueDesc)
				m.Set(otherStringValueDesc.Fields().ByName("value"), protoreflect.ValueOfString("far"))
				return m
			}(),
			dst:  func() any { return new(wrapperspb.StringValue) },
			want: wrapperspb.String("far"),
			opts: []cmp.Option{protocmp.Transform()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNode(t)
			mustAdd(t, n, "res:1", replyMsg(tt.result))
			res, err := n.Act(t.Context(), "res:1", nil)
			if err != nil {
				t.Fatalf("Act: %v", err)
			}
			if diff := cmp.Diff(tt.result, res.Value(), protocmp.Transform()); diff != "" {
				t.Errorf("Value() mismatch (-want +got):\n%s", diff)
			}
			dst := tt.dst()
			if err := res.Decode(dst); err != nil {
				t.Fatalf("Decode(%T): %v", dst, err)
			}
			got := derefDst(dst)
			if diff := cmp.Diff(tt.want, got, tt.opts...); diff != "" {
				t.Errorf("Decode(%T) mismatch (-want +got):\n%s", dst, diff)
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

// derefDst returns what a Decode destination holds: the message itself for
// a proto message, else the pointed-to value.
func derefDst(dst any) any {
	switch d := dst.(type) {
	case proto.Message:
		return d
	case *point:
		return *d
	case **point:
		return *d
	case *any:
		return *d
	case *map[string]any:
		return *d
	}
	panic(fmt.Sprintf("derefDst: unexpected %T", dst))
}

func TestResult_DecodeErrors(t *testing.T) {
	tests := []struct {
		name   string
		result any
		dst    any
	}{
		{"nil destination", "x", nil},
		{"non-pointer destination", "x", point{}},
		{"nil struct pointer", map[string]any{"X": 1}, (*point)(nil)},
		{"nil proto pointer", map[string]any{"value": "x"}, (*wrapperspb.StringValue)(nil)},
		{"string into struct", "just a string", new(point)},
		{"wrong field type", map[string]any{"X": "not a number"}, new(point)},
		{"map into proto with a bad field", map[string]any{"n": "seven"}, dynamicpb.NewMessage(sumDesc)},
		{"unencodable value", make(chan int), new(point)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNode(t)
			mustAdd(t, n, "res:1", replyMsg(tt.result))
			res, err := n.Act(t.Context(), "res:1", nil)
			if err != nil {
				t.Fatalf("Act: %v", err)
			}
			err = res.Decode(tt.dst)
			wantCode(t, err, runtime.CodeInvalidArgument)
		})
	}
}

func TestResult_NilValue(t *testing.T) {
	n := newTestNode(t)
	mustAdd(t, n, "res:nil", replyMsg(nil))
	res, err := n.Act(t.Context(), "res:nil", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Value() != nil {
		t.Errorf("Value() = %v, want nil", res.Value())
	}
	// Decoding nothing leaves the destination as it was.
	p := point{X: 9}
	if err := res.Decode(&p); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if diff := cmp.Diff(point{X: 9}, p); diff != "" {
		t.Errorf("Decode of a nil result changed dst (-want +got):\n%s", diff)
	}
	var zero runtime.Result
	if zero.Value() != nil {
		t.Errorf("zero Result Value() = %v", zero.Value())
	}
}

func TestRequest_Get(t *testing.T) {
	sum := newSum(map[string]any{"role": "math", "cmd": "sum", "a": 1.5, "n": int32(7), "ok": true, "kind": protoreflect.EnumNumber(1), "tags": []string{"x"}})
	tests := []struct {
		name string
		call func(n *runtime.Node, ctx context.Context) error
		want map[string]any // key -> Get(key); nil means absent
	}{
		{
			name: "Act map: message fields and pattern pairs, pattern wins",
			call: func(n *runtime.Node, ctx context.Context) error {
				_, err := n.Act(ctx, "get:1", map[string]any{"get": 2, "a": 1.5, "nested": map[string]any{"x": 1}})
				return err
			},
			want: map[string]any{"get": "1", "a": 1.5, "nested": map[string]any{"x": 1.0}, "missing": nil},
		},
		{
			name: "Act map[string]string",
			call: func(n *runtime.Node, ctx context.Context) error {
				_, err := n.Act(ctx, "get:1", map[string]string{"a": "x"})
				return err
			},
			want: map[string]any{"get": "1", "a": "x", "missing": nil},
		},
		{
			name: "Act JSON: numbers are float64",
			call: func(n *runtime.Node, ctx context.Context) error {
				_, err := n.Act(ctx, "get:1", []byte(`{"a": 2, "s": "str", "get": 5}`))
				return err
			},
			want: map[string]any{"get": "1", "a": 2.0, "s": "str", "missing": nil},
		},
		{
			name: "Act nil message: only the pattern",
			call: func(n *runtime.Node, ctx context.Context) error {
				_, err := n.Act(ctx, "get:1", nil)
				return err
			},
			want: map[string]any{"get": "1", "a": nil},
		},
		{
			name: "Act proto: fields by proto name, pattern pairs too",
			call: func(n *runtime.Node, ctx context.Context) error {
				_, err := n.Act(ctx, "get:1", sum)
				return err
			},
			want: map[string]any{"get": "1", "role": "math", "a": 1.5, "n": int32(7), "ok": true, "b": nil, "missing": nil},
		},
		{
			name: "ActE map: the data alone",
			call: func(n *runtime.Node, ctx context.Context) error {
				_, err := n.ActE(ctx, "get:1", map[string]any{"a": 1})
				return err
			},
			want: map[string]any{"get": nil, "a": 1.0},
		},
		{
			name: "ActE map[string]string",
			call: func(n *runtime.Node, ctx context.Context) error {
				_, err := n.ActE(ctx, "get:1", map[string]string{"a": "x"})
				return err
			},
			want: map[string]any{"get": nil, "a": "x", "b": nil},
		},
		{
			name: "ActE JSON bytes",
			call: func(n *runtime.Node, ctx context.Context) error {
				_, err := n.ActE(ctx, "get:1", []byte(`{"a": 1}`))
				return err
			},
			want: map[string]any{"get": nil, "a": 1.0},
		},
		{
			name: "ActE json.RawMessage",
			call: func(n *runtime.Node, ctx context.Context) error {
				_, err := n.ActE(ctx, "get:1", json.RawMessage(`{"a": "r"}`))
				return err
			},
			want: map[string]any{"get": nil, "a": "r"},
		},
		{
			name: "ActE invalid JSON: nothing",
			call: func(n *runtime.Node, ctx context.Context) error {
				_, err := n.ActE(ctx, "get:1", []byte(`{`))
				return err
			},
			want: map[string]any{"a": nil},
		},
		{
			name: "ActE proto",
			call: func(n *runtime.Node, ctx context.Context) error {
				_, err := n.ActE(ctx, "get:1", sum)
				return err
			},
			want: map[string]any{"get": nil, "cmd": "sum", "n": int32(7)},
		},
		{
			name: "ActE struct: nothing",
			call: func(n *runtime.Node, ctx context.Context) error {
				_, err := n.ActE(ctx, "get:1", point{X: 1})
				return err
			},
			want: map[string]any{"X": nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNode(t)
			got := map[string]any{}
			mustAdd(t, n, "get:1", func(ctx context.Context, r runtime.Request) (any, error) {
				for k := range tt.want {
					got[k] = r.Get(k)
				}
				return nil, nil
			})
			if err := tt.call(n, t.Context()); err != nil {
				t.Fatalf("call: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Get mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRequest_DecodeAndPattern(t *testing.T) {
	n := newTestNode(t)
	type msg struct {
		Role string `json:"role"`
		Cmd  string `json:"cmd"`
		A    float64
	}
	var got msg
	var pattern string
	mustAdd(t, n, "role:dec", func(ctx context.Context, r runtime.Request) (any, error) {
		pattern = r.Pattern().String()
		return nil, r.Decode(&got)
	})
	// Act: the handler decodes the merged message; Pattern is the added
	// pattern, not the message's.
	if _, err := n.Act(t.Context(), "role:dec", map[string]any{"cmd": "x", "A": 2, "role": "ignored"}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(msg{Role: "dec", Cmd: "x", A: 2}, got); diff != "" {
		t.Errorf("Decode mismatch (-want +got):\n%s", diff)
	}
	if pattern != "role:dec" {
		t.Errorf("Pattern() = %q, want %q", pattern, "role:dec")
	}

	// A Decode failure inside the handler reaches the caller with its code.
	_, err := n.ActE(t.Context(), "role:dec", "not an object")
	wantCode(t, err, runtime.CodeInvalidArgument)

	var zero runtime.Request
	if zero.Pattern().String() != "" || zero.Msg() != nil || zero.Get("x") != nil {
		t.Error("zero Request is not empty")
	}
}

// TestAct_ProtoRouting checks which fields of a protobuf message route:
// populated singular scalars by proto name, enums by value name.
func TestAct_ProtoRouting(t *testing.T) {
	tests := []struct {
		name   string
		fields map[string]any
		want   string // the pattern (added below) that must answer
	}{
		{"string fields", map[string]any{"role": "p", "cmd": "get"}, "cmd:get,role:p"},
		{"int", map[string]any{"role": "p", "n": int32(3)}, "n:3,role:p"},
		{"double in shortest form", map[string]any{"role": "p", "a": 2.0}, "a:2,role:p"},
		{"bool", map[string]any{"role": "p", "ok": true}, "ok:true,role:p"},
		{"enum by name", map[string]any{"role": "p", "kind": protoreflect.EnumNumber(1)}, "kind:KIND_FAST,role:p"},
		{"unset fields do not route", map[string]any{"role": "p", "n": int32(0), "ok": false}, "role:p"},
		{"repeated fields do not route", map[string]any{"role": "p", "tags": []string{"x"}}, "role:p"},
	}
	n := newTestNode(t)
	for _, p := range []string{"role:p", "role:p,cmd:get", "role:p,n:3", "role:p,a:2", "role:p,ok:true", "role:p,kind:KIND_FAST", "role:p,tags:x"} {
		mustAdd(t, n, p, func(ctx context.Context, r runtime.Request) (any, error) {
			return r.Pattern().String(), nil
		})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := n.Act(t.Context(), "", newSum(tt.fields))
			if err != nil {
				t.Fatalf("Act: %v", err)
			}
			if diff := cmp.Diff(tt.want, res.Value()); diff != "" {
				t.Errorf("handler mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAct_ValueForms checks that message values route in their canonical
// form, whatever their Go type.
func TestAct_ValueForms(t *testing.T) {
	n := newTestNode(t)
	mustAdd(t, n, "v:2", replyMsg("two"))
	mustAdd(t, n, "v:2.5", replyMsg("two and a half"))
	mustAdd(t, n, "v:true", replyMsg("true"))
	tests := []struct {
		name string
		msg  any
		want string
	}{
		{"int", map[string]any{"v": 2}, "two"},
		{"int64", map[string]any{"v": int64(2)}, "two"},
		{"uint8", map[string]any{"v": uint8(2)}, "two"},
		{"float 2.0", map[string]any{"v": 2.0}, "two"},
		{"float32", map[string]any{"v": float32(2.5)}, "two and a half"},
		{"string", map[string]any{"v": "2"}, "two"},
		{"json.Number", map[string]any{"v": json.Number("2.50")}, "two and a half"},
		{"JSON number", []byte(`{"v": 2.0}`), "two"},
		{"JSON exponent", []byte(`{"v": 0.25e1}`), "two and a half"},
		{"bool", map[string]any{"v": true}, "true"},
		{"JSON bool", json.RawMessage(`{"v": true}`), "true"},
		{"map[string]string", map[string]string{"v": "2.5"}, "two and a half"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := n.Act(t.Context(), "", tt.msg)
			if err != nil {
				t.Fatalf("Act: %v", err)
			}
			if diff := cmp.Diff(tt.want, res.Value()); diff != "" {
				t.Errorf("handler mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// A *T result decoded into a *T is copied as is, unexported fields included.
func TestDecodeSamePointerType(t *testing.T) {
	type secret struct {
		Public  int
		private string
	}
	src := &secret{Public: 1, private: "kept"}
	var dst secret
	node := newTestNode(t)
	mustAdd(t, node, "a:1", func(context.Context, runtime.Request) (any, error) { return src, nil })
	res, err := node.ActE(t.Context(), "a:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Decode(&dst); err != nil {
		t.Fatal(err)
	}
	if dst != *src {
		t.Errorf("Decode = %+v, want %+v", dst, *src)
	}
}
