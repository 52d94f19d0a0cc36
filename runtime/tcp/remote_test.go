package tcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

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
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/introspect"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// pointDesc describes wizardtest.Point, a message type built at run time
// and registered nowhere: only dynamicpb can hold it.
var pointDesc = sync.OnceValue(func() protoreflect.MessageDescriptor {
	optional := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:    proto.String("wizardtest/point.proto"),
		Package: proto.String("wizardtest"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("Point"),
			Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("x"), JsonName: proto.String("x"), Number: proto.Int32(1), Label: optional, Type: descriptorpb.FieldDescriptorProto_TYPE_INT64.Enum()},
				{Name: proto.String("label"), JsonName: proto.String("label"), Number: proto.Int32(2), Label: optional, Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()},
			},
		}},
	}, nil)
	if err != nil {
		panic(err)
	}
	return fd.Messages().ByName("Point")
})

func newPoint(x int64, label string) *dynamicpb.Message {
	m := dynamicpb.NewMessage(pointDesc())
	m.Set(pointDesc().Fields().ByName("x"), protoreflect.ValueOfInt64(x))
	m.Set(pointDesc().Fields().ByName("label"), protoreflect.ValueOfString(label))
	return m
}

// TestRemoteMessages sends each kind of message to a remote handler and
// reads each kind of result back, with Result.Value and Result.Decode.
func TestRemoteMessages(t *testing.T) {
	srv := newServer(t)
	// echo answers with the message as its handler sees it.
	transporttest.MustAdd(t, srv, "role:echo,cmd:msg", func(ctx context.Context, r runtime.Request) (any, error) { return r.Msg(), nil })
	transporttest.MustAdd(t, srv, "role:echo,cmd:double", runtime.NewUnaryHandler(func(ctx context.Context, r *wrapperspb.Int64Value) (*wrapperspb.Int64Value, error) {
		return wrapperspb.Int64(2 * r.GetValue()), nil
	}))
	transporttest.MustAdd(t, srv, "role:echo,cmd:struct", runtime.NewUnaryHandler(func(ctx context.Context, r *structpb.Struct) (*structpb.Struct, error) {
		r.Fields["seen"] = structpb.NewBoolValue(true)
		return r, nil
	}))
	transporttest.MustAdd(t, srv, "role:echo,cmd:point", func(ctx context.Context, r runtime.Request) (any, error) {
		return newPoint(7, "seven"), nil
	})
	transporttest.MustAdd(t, srv, "role:echo,cmd:decodepoint", func(ctx context.Context, r runtime.Request) (any, error) {
		in := dynamicpb.NewMessage(pointDesc())
		if err := r.Decode(in); err != nil {
			return nil, err
		}
		x := in.Get(pointDesc().Fields().ByName("x")).Int()
		return map[string]any{"x": x}, nil
	})
	transporttest.MustAdd(t, srv, "role:echo,cmd:string", func(ctx context.Context, r runtime.Request) (any, error) { return "hello", nil })
	transporttest.MustAdd(t, srv, "role:echo,cmd:nil", func(ctx context.Context, r runtime.Request) (any, error) {
		if m := r.Msg(); m != nil {
			return nil, runtime.Errorf(runtime.CodeInvalidArgument, "got %#v, want nil", m)
		}
		return nil, nil
	})
	cl := newClient(t, "role:echo,cmd:nil", srv.Addr())
	ctx := t.Context()

	t.Run("map", func(t *testing.T) {
		res, err := cl.ActE(ctx, "role:echo,cmd:msg", map[string]any{"a": 1, "s": "x", "l": []int{1, 2}, "m": map[string]any{"k": true}})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"a": 1.0, "s": "x", "l": []any{1.0, 2.0}, "m": map[string]any{"k": true}}
		if diff := cmp.Diff(want, res.Value()); diff != "" {
			t.Errorf("Value() mismatch (-want +got):\n%s", diff)
		}
		var got map[string]any
		if err := res.Decode(&got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Decode(*map) mismatch (-want +got):\n%s", diff)
		}
		var st struct {
			A int
			S string
			L []int
		}
		if err := res.Decode(&st); err != nil || st.A != 1 || st.S != "x" || len(st.L) != 2 {
			t.Errorf("Decode(*struct) = %+v, %v", st, err)
		}
		var anyv any
		if err := res.Decode(&anyv); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, anyv); diff != "" {
			t.Errorf("Decode(*any) mismatch (-want +got):\n%s", diff)
		}
	})

	for _, tt := range []struct {
		name string
		msg  any
	}{
		{"JSON bytes", []byte(`{"a":1,"b":"two"}`)},
		{"json.RawMessage", json.RawMessage(`{"a":1,"b":"two"}`)},
		{"map[string]string", map[string]string{"a": "1", "b": "two"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := cl.ActE(ctx, "role:echo,cmd:msg", tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := res.Value().(map[string]any)
			if !ok || got["b"] != "two" || fmt.Sprint(got["a"]) != "1" {
				t.Errorf("Value() = %#v", res.Value())
			}
		})
	}

	t.Run("protobuf", func(t *testing.T) {
		res, err := cl.ActE(ctx, "role:echo,cmd:double", wrapperspb.Int64(21))
		if err != nil {
			t.Fatal(err)
		}
		// Value decodes into the registered type.
		if diff := cmp.Diff(wrapperspb.Int64(42), res.Value(), protocmp.Transform()); diff != "" {
			t.Errorf("Value() mismatch (-want +got):\n%s", diff)
		}
		var got wrapperspb.Int64Value
		if err := res.Decode(&got); err != nil || got.GetValue() != 42 {
			t.Errorf("Decode = %v, %v", &got, err)
		}
		// Into another message type: refused, naming both (its field
		// numbers would be read as the other type's).
		var other wrapperspb.StringValue
		if err := res.Decode(&other); runtime.CodeOf(err) != runtime.CodeInvalidArgument || !strings.Contains(fmt.Sprint(err), "a google.protobuf.Int64Value cannot be decoded into a google.protobuf.StringValue") {
			t.Errorf("Decode(Int64Value into StringValue) = %v, %v; want invalid_argument naming both", &other, err)
		}
	})

	t.Run("structpb", func(t *testing.T) {
		in, err := structpb.NewStruct(map[string]any{"a": 1, "b": "x"})
		if err != nil {
			t.Fatal(err)
		}
		res, err := cl.ActE(ctx, "role:echo,cmd:struct", in)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"a": 1.0, "b": "x", "seen": true}
		s, ok := res.Value().(*structpb.Struct)
		if !ok {
			t.Fatalf("Value() is a %T, want *structpb.Struct", res.Value())
		}
		if diff := cmp.Diff(want, s.AsMap()); diff != "" {
			t.Errorf("Value() mismatch (-want +got):\n%s", diff)
		}
		var m map[string]any
		if err := res.Decode(&m); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, m); diff != "" {
			t.Errorf("Decode(*map) mismatch (-want +got):\n%s", diff)
		}
		// A structpb request reaches a map handler as its JSON form.
		res, err = cl.ActE(ctx, "role:echo,cmd:msg", in)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(in, res.Value(), protocmp.Transform()); diff != "" {
			t.Errorf("echo mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("dynamicpb of a registered type", func(t *testing.T) {
		desc := (&wrapperspb.Int64Value{}).ProtoReflect().Descriptor()
		in := dynamicpb.NewMessage(desc)
		in.Set(desc.Fields().ByName("value"), protoreflect.ValueOfInt64(5))
		res, err := cl.ActE(ctx, "role:echo,cmd:double", in)
		if err != nil {
			t.Fatal(err)
		}
		out := dynamicpb.NewMessage(desc)
		if err := res.Decode(out); err != nil {
			t.Fatal(err)
		}
		if got := out.Get(desc.Fields().ByName("value")).Int(); got != 10 {
			t.Errorf("value = %d, want 10", got)
		}
	})

	t.Run("dynamicpb result of an unregistered type", func(t *testing.T) {
		res, err := cl.ActE(ctx, "role:echo,cmd:point", nil)
		if err != nil {
			t.Fatal(err)
		}
		out := dynamicpb.NewMessage(pointDesc())
		if err := res.Decode(out); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(newPoint(7, "seven"), out, protocmp.Transform()); diff != "" {
			t.Errorf("Decode mismatch (-want +got):\n%s", diff)
		}
		// Value cannot know the type: it gives the encoded bytes.
		if b, ok := res.Value().([]byte); !ok || len(b) == 0 {
			t.Errorf("Value() = %#v, want the encoded bytes", res.Value())
		}
		var m map[string]any
		if err := res.Decode(&m); err == nil {
			t.Errorf("Decode(*map) of an unregistered type = %v, want an error", m)
		}
	})

	t.Run("dynamicpb request of an unregistered type", func(t *testing.T) {
		// The handler decodes into a message of the type's descriptor,
		// without a registry.
		res, err := cl.ActE(ctx, "role:echo,cmd:decodepoint", newPoint(3, "three"))
		if err != nil {
			t.Fatal(err)
		}
		var got struct{ X int64 }
		if err := res.Decode(&got); err != nil || got.X != 3 {
			t.Errorf("x = %+v, %v, want 3", got, err)
		}
	})

	t.Run("Act with a dynamicpb request of an unregistered type", func(t *testing.T) {
		// Act routes by the message's fields too: the pattern's pairs
		// travel beside it, for Request.Get.
		res, err := cl.Act(ctx, "role:echo,cmd:decodepoint", newPoint(4, "four"))
		if err != nil {
			t.Fatal(err)
		}
		var got struct{ X int64 }
		if err := res.Decode(&got); err != nil || got.X != 4 {
			t.Errorf("x = %+v, %v, want 4", got, err)
		}
	})

	t.Run("string result", func(t *testing.T) {
		res, err := cl.ActE(ctx, "role:echo,cmd:string", nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Value() != "hello" {
			t.Errorf("Value() = %#v", res.Value())
		}
		var s string
		if err := res.Decode(&s); err != nil || s != "hello" {
			t.Errorf("Decode = %q, %v", s, err)
		}
	})

	t.Run("nil", func(t *testing.T) {
		res, err := cl.ActE(ctx, "role:echo,cmd:nil", nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Value() != nil {
			t.Errorf("Value() = %#v, want nil", res.Value())
		}
		var m map[string]any
		if err := res.Decode(&m); err != nil || m != nil {
			t.Errorf("Decode = %v, %v; want nothing stored", m, err)
		}
		// Act with a nil message sends the pattern's pairs.
		res, err = cl.Act(ctx, "role:echo,cmd:msg", nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]any{"role": "echo", "cmd": "msg"}, res.Value()); diff != "" {
			t.Errorf("Act(nil) mismatch (-want +got):\n%s", diff)
		}
	})
}

// TestRemoteTypedClient calls remote handlers through runtime.NewClient,
// as generated clients do.
func TestRemoteTypedClient(t *testing.T) {
	srv := newServer(t)
	transporttest.MustAdd(t, srv, "role:typed,cmd:double", runtime.NewUnaryHandler(func(ctx context.Context, r *wrapperspb.Int64Value) (*wrapperspb.Int64Value, error) {
		return wrapperspb.Int64(2 * r.GetValue()), nil
	}))
	transporttest.MustAdd(t, srv, "role:typed,cmd:nil", runtime.NewUnaryHandler(func(ctx context.Context, r *wrapperspb.Int64Value) (*wrapperspb.Int64Value, error) {
		return nil, nil
	}))
	transporttest.MustAdd(t, srv, "role:typed,cmd:fail", runtime.NewUnaryHandler(func(ctx context.Context, r *wrapperspb.Int64Value) (*wrapperspb.Int64Value, error) {
		return nil, runtime.Errorf(runtime.CodeOutOfRange, "wizard: %d is too big", r.GetValue())
	}))
	transporttest.MustAdd(t, srv, "role:typed,cmd:struct", runtime.NewUnaryHandler(func(ctx context.Context, r *sumArgs) (*sumResult, error) {
		return &sumResult{R: r.A + r.B}, nil
	}))
	cl := newClient(t, "role:typed,cmd:fail", srv.Addr())

	double := transporttest.TypedClient[wrapperspb.Int64Value, wrapperspb.Int64Value](t, cl, "role:typed,cmd:double")
	got, err := double.Call(t.Context(), wrapperspb.Int64(21))
	if err != nil || got.GetValue() != 42 {
		t.Errorf("double = %v, %v", got, err)
	}
	// With per-call options: the slower path.
	got, err = double.Call(t.Context(), wrapperspb.Int64(4), runtime.Timeout(time.Second))
	if err != nil || got.GetValue() != 8 {
		t.Errorf("double with Timeout = %v, %v", got, err)
	}

	// A nil result is an empty response, as it is in-process.
	got, err = transporttest.TypedClient[wrapperspb.Int64Value, wrapperspb.Int64Value](t, cl, "role:typed,cmd:nil").Call(t.Context(), wrapperspb.Int64(1))
	if err != nil || got == nil || proto.Size(got) != 0 {
		t.Errorf("nil result = %v (nil: %v), %v; want an empty response", got, got == nil, err)
	}

	_, err = transporttest.TypedClient[wrapperspb.Int64Value, wrapperspb.Int64Value](t, cl, "role:typed,cmd:fail").Call(t.Context(), wrapperspb.Int64(99))
	transporttest.WantCode(t, err, runtime.CodeOutOfRange)
	if err.Error() != "wizard: 99 is too big" {
		t.Errorf("message = %q", err.Error())
	}

	// Go structs travel as JSON.
	sum, err := transporttest.TypedClient[sumArgs, sumResult](t, cl, "role:typed,cmd:struct").Call(t.Context(), &sumArgs{A: 1, B: 2})
	if err != nil || sum.R != 3 {
		t.Errorf("struct sum = %+v, %v", sum, err)
	}

	// A client of a Caller that is not a Node.
	viaCaller := transporttest.TypedClient[wrapperspb.Int64Value, wrapperspb.Int64Value](t, callerFunc(cl.ActE), "role:typed,cmd:double")
	got, err = viaCaller.Call(t.Context(), wrapperspb.Int64(5))
	if err != nil || got.GetValue() != 10 {
		t.Errorf("through a Caller = %v, %v", got, err)
	}
}

type sumArgs struct{ A, B float64 }
type sumResult struct{ R float64 }

type callerFunc func(ctx context.Context, pattern string, data any, opts ...runtime.CallOption) (runtime.Result, error)

func (f callerFunc) ActE(ctx context.Context, pattern string, data any, opts ...runtime.CallOption) (runtime.Result, error) {
	return f(ctx, pattern, data, opts...)
}

// TestRemoteActOverlay checks what a remote handler receives from Act (the
// message overlaid with the pattern) and from ActE with Mixin (the data
// alone, routed by the pattern and the mixed-in fields).
func TestRemoteActOverlay(t *testing.T) {
	srv := newServer(t)
	type seen struct {
		msg  any
		role any
	}
	got := make(chan seen, 1)
	record := func(ctx context.Context, r runtime.Request) (any, error) {
		got <- seen{r.Msg(), r.Get("role")}
		return r.Pattern().String(), nil
	}
	transporttest.MustAdd(t, srv, "role:user,cmd:get", record)
	transporttest.MustAdd(t, srv, "role:user,cmd:get,kind:admin", record)
	transporttest.MustAdd(t, srv, "role:user,cmd:get,value:admin", record)
	cl := newClient(t, "role:user,cmd:get,value:admin", srv.Addr())
	ctx := t.Context()

	t.Run("Act with a map: the pattern wins", func(t *testing.T) {
		caller := map[string]any{"role": "other", "id": 7}
		res, err := cl.Act(ctx, "role:user,cmd:get", caller)
		if err != nil {
			t.Fatal(err)
		}
		s := testwait.Recv(t, got)
		if diff := cmp.Diff(map[string]any{"role": "user", "cmd": "get", "id": 7.0}, s.msg); diff != "" {
			t.Errorf("handler's message mismatch (-want +got):\n%s", diff)
		}
		if res.Value() != "cmd:get,role:user" {
			t.Errorf("served by %v", res.Value())
		}
		if caller["role"] != "other" {
			t.Errorf("the caller's map was modified: %v", caller)
		}
	})

	t.Run("Act routes by the message's fields", func(t *testing.T) {
		res, err := cl.Act(ctx, "role:user,cmd:get", map[string]any{"kind": "admin"})
		if err != nil {
			t.Fatal(err)
		}
		s := testwait.Recv(t, got)
		if diff := cmp.Diff(map[string]any{"role": "user", "cmd": "get", "kind": "admin"}, s.msg); diff != "" {
			t.Errorf("handler's message mismatch (-want +got):\n%s", diff)
		}
		if res.Value() != "cmd:get,kind:admin,role:user" {
			t.Errorf("served by %v", res.Value())
		}
	})

	t.Run("Act with a protobuf message", func(t *testing.T) {
		res, err := cl.Act(ctx, "role:user,cmd:get", wrapperspb.String("admin"))
		if err != nil {
			t.Fatal(err)
		}
		s := testwait.Recv(t, got)
		if res.Value() != "cmd:get,role:user,value:admin" {
			t.Errorf("served by %v", res.Value())
		}
		if diff := cmp.Diff(wrapperspb.String("admin"), s.msg, protocmp.Transform()); diff != "" {
			t.Errorf("handler's message mismatch (-want +got):\n%s", diff)
		}
		// As in-process, Get sees the pattern's pairs.
		if s.role != "user" {
			t.Errorf("Get(role) = %#v, want user", s.role)
		}
	})

	t.Run("ActE hands over the data alone", func(t *testing.T) {
		res, err := cl.ActE(ctx, "role:user,cmd:get", map[string]any{"kind": "admin", "id": 7})
		if err != nil {
			t.Fatal(err)
		}
		s := testwait.Recv(t, got)
		if diff := cmp.Diff(map[string]any{"kind": "admin", "id": 7.0}, s.msg); diff != "" {
			t.Errorf("handler's message mismatch (-want +got):\n%s", diff)
		}
		if res.Value() != "cmd:get,role:user" {
			t.Errorf("without Mixin, served by %v", res.Value())
		}
	})

	t.Run("ActE with Mixin", func(t *testing.T) {
		res, err := cl.ActE(ctx, "role:user,cmd:get", map[string]any{"kind": "admin", "id": 7}, runtime.Mixin("kind"))
		if err != nil {
			t.Fatal(err)
		}
		s := testwait.Recv(t, got)
		if diff := cmp.Diff(map[string]any{"kind": "admin", "id": 7.0}, s.msg); diff != "" {
			t.Errorf("handler's message mismatch (-want +got):\n%s", diff)
		}
		if res.Value() != "cmd:get,kind:admin,role:user" {
			t.Errorf("served by %v", res.Value())
		}
	})

	t.Run("ActE with Mixin and a protobuf message", func(t *testing.T) {
		res, err := cl.ActE(ctx, "role:user,cmd:get", wrapperspb.String("admin"), runtime.Mixin("value"))
		if err != nil {
			t.Fatal(err)
		}
		s := testwait.Recv(t, got)
		if diff := cmp.Diff(wrapperspb.String("admin"), s.msg, protocmp.Transform()); diff != "" {
			t.Errorf("handler's message mismatch (-want +got):\n%s", diff)
		}
		if res.Value() != "cmd:get,role:user,value:admin" {
			t.Errorf("served by %v", res.Value())
		}
	})

	t.Run("typed client with Mixin", func(t *testing.T) {
		c := transporttest.TypedClient[wrapperspb.StringValue, wrapperspb.StringValue](t, cl, "role:user,cmd:get", runtime.Mixin("value"))
		// The handler answers its pattern as a JSON string, which protojson
		// reads into a StringValue.
		out, err := c.Call(ctx, wrapperspb.String("admin"))
		if err != nil || out.GetValue() != "cmd:get,role:user,value:admin" {
			t.Fatalf("served by %v, %v", out, err)
		}
		s := testwait.Recv(t, got)
		if diff := cmp.Diff(wrapperspb.String("admin"), s.msg, protocmp.Transform()); diff != "" {
			t.Errorf("handler's message mismatch (-want +got):\n%s", diff)
		}
	})
}

// TestRemoteErrors checks that a remote handler's error reaches the caller
// with its code and message, for every code.
func TestRemoteErrors(t *testing.T) {
	srv := newServer(t)
	transporttest.MustAdd(t, srv, "role:err,cmd:code", func(ctx context.Context, r runtime.Request) (any, error) {
		var a struct {
			Code    runtime.Code
			Message string
		}
		if err := r.Decode(&a); err != nil {
			return nil, err
		}
		return nil, runtime.NewError(a.Code, a.Message)
	})
	transporttest.MustAdd(t, srv, "role:err,cmd:plain", func(ctx context.Context, r runtime.Request) (any, error) {
		return "ignored", fmt.Errorf("db: %w", errors.New("disk on fire"))
	})
	transporttest.MustAdd(t, srv, "role:err,cmd:ctx", func(ctx context.Context, r runtime.Request) (any, error) {
		return nil, fmt.Errorf("stopped: %w", context.DeadlineExceeded)
	})
	transporttest.MustAdd(t, srv, "role:err,cmd:details", func(ctx context.Context, r runtime.Request) (any, error) {
		return nil, &runtime.Error{Code: runtime.CodePermissionDenied, Message: "wizard: denied", Details: []proto.Message{wrapperspb.String("why"), wrapperspb.Int64(7)}}
	})
	transporttest.MustAdd(t, srv, "role:err,cmd:panic", func(ctx context.Context, r runtime.Request) (any, error) {
		panic("secret panic value")
	})
	transporttest.MustAdd(t, srv, "role:err,cmd:gone", func(ctx context.Context, r runtime.Request) (any, error) { return "here", nil })
	// A long refresh: the client keeps routing to what the server removed.
	cl := newClientWith(t, "role:err,cmd:gone", []runtime.Option{runtime.WithCatalogRefresh(time.Hour)}, srv.Addr())
	ctx := t.Context()

	for code := runtime.CodeCanceled; code <= runtime.CodeUnauthenticated+1; code++ {
		t.Run(code.String(), func(t *testing.T) {
			msg := fmt.Sprintf("wizard: failed with %s", code)
			call := func() error {
				_, err := cl.ActE(ctx, "role:err,cmd:code", map[string]any{"Code": code, "Message": msg})
				return err
			}
			for _, via := range []struct {
				name string
				call func() error
			}{
				{"ActE", call},
				{"typed client", func() error {
					_, err := transporttest.TypedClient[map[string]any, map[string]any](t, cl, "role:err,cmd:code").Call(ctx, &map[string]any{"Code": code, "Message": msg})
					return err
				}},
			} {
				err := via.call()
				var e *runtime.Error
				if !errors.As(err, &e) {
					t.Fatalf("%s: err = %#v, want a *runtime.Error", via.name, err)
				}
				if e.Code != code || e.Message != msg || err.Error() != msg {
					t.Errorf("%s: got %v %q, want %v %q", via.name, e.Code, e.Message, code, msg)
				}
				if !errors.Is(err, runtime.NewError(code, msg)) || !errors.Is(err, &runtime.Error{Code: code}) {
					t.Errorf("%s: errors.Is does not match the code and message", via.name)
				}
			}
		})
	}

	t.Run("empty message", func(t *testing.T) {
		_, err := cl.ActE(ctx, "role:err,cmd:code", map[string]any{"Code": runtime.CodeAborted})
		var e *runtime.Error
		if !errors.As(err, &e) || e.Code != runtime.CodeAborted || e.Message != "" || err.Error() != "wizard: aborted" {
			t.Errorf("err = %#v", err)
		}
	})

	t.Run("plain error", func(t *testing.T) {
		_, err := cl.ActE(ctx, "role:err,cmd:plain", nil)
		transporttest.WantCode(t, err, runtime.CodeUnknown)
		if err.Error() != "db: disk on fire" {
			t.Errorf("message = %q", err.Error())
		}
	})

	t.Run("context error", func(t *testing.T) {
		_, err := cl.ActE(ctx, "role:err,cmd:ctx", nil)
		transporttest.WantCode(t, err, runtime.CodeDeadlineExceeded)
		if !errors.Is(err, runtime.ErrDeadlineExceeded) || err.Error() != "stopped: context deadline exceeded" {
			t.Errorf("err = %v", err)
		}
	})

	t.Run("details", func(t *testing.T) {
		_, err := cl.ActE(ctx, "role:err,cmd:details", nil)
		var e *runtime.Error
		if !errors.As(err, &e) || e.Code != runtime.CodePermissionDenied || e.Message != "wizard: denied" {
			t.Fatalf("err = %#v", err)
		}
		want := []proto.Message{wrapperspb.String("why"), wrapperspb.Int64(7)}
		if diff := cmp.Diff(want, e.Details, protocmp.Transform()); diff != "" {
			t.Errorf("details mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("panic", func(t *testing.T) {
		_, err := cl.ActE(ctx, "role:err,cmd:panic", nil)
		transporttest.WantCode(t, err, runtime.CodeInternal)
		for _, leak := range []string{"secret panic value", "goroutine", ".go:", "runtime/debug"} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("the message %q shows %q", err.Error(), leak)
			}
		}
		// The server is still serving.
		if _, err := cl.ActE(ctx, "role:err,cmd:gone", nil); err != nil {
			t.Errorf("after a panic: %v", err)
		}
	})

	t.Run("no match on the remote", func(t *testing.T) {
		if _, err := cl.ActE(ctx, "role:err,cmd:nothing", nil); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("no match anywhere: %v", err)
		}
		if ok, err := srv.Remove("role:err,cmd:gone"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		// The client still routes it there.
		_, err := cl.ActE(ctx, "role:err,cmd:gone", nil)
		transporttest.WantCode(t, err, runtime.CodeNotFound)
		if !strings.Contains(err.Error(), "has no handler for") {
			t.Errorf("err = %v, want the remote node's answer", err)
		}
		// That answer makes the client fetch the catalog again, at once.
		testwait.Until(t, "the client drops the removed pattern", func() bool { return !transporttest.Routes(cl, "role:err,cmd:gone") })
		_, err = cl.ActE(ctx, "role:err,cmd:gone", nil)
		if !errors.Is(err, runtime.ErrNotFound) || !strings.Contains(err.Error(), "no handler matches") {
			t.Errorf("after the refresh: %v", err)
		}
	})
}

// TestRemotePrecedence checks the best match over local and remote
// patterns.
func TestRemotePrecedence(t *testing.T) {
	srv := newServer(t, runtime.WithID("server"))
	answer := func(who string) runtime.Handler {
		return func(ctx context.Context, r runtime.Request) (any, error) {
			return who + " " + r.Pattern().String(), nil
		}
	}
	transporttest.MustAdd(t, srv, "role:math,cmd:sum", answer("server"))
	transporttest.MustAdd(t, srv, "role:both", answer("server"))
	transporttest.MustAdd(t, srv, "role:sync", answer("server"))
	cl := transporttest.NewNode(t, runtime.WithTransport(newTransport(t)), runtime.WithDiscovery(runtime.StaticPeers(srv.Addr())), runtime.WithCatalogRefresh(time.Hour))
	transporttest.MustAdd(t, cl, "role:math", answer("client"))
	transporttest.MustAdd(t, cl, "role:both", answer("client"))
	// role:both is routable at once (local); role:sync says that the
	// server's catalog, which holds all three patterns, has arrived.
	transporttest.WaitRoutable(t, cl, "role:sync")
	ctx := t.Context()

	act := func(pattern string, msg any) string {
		t.Helper()
		res, err := cl.Act(ctx, pattern, msg)
		if err != nil {
			t.Fatalf("Act(%q): %v", pattern, err)
		}
		return res.Value().(string)
	}
	if got := act("role:math,cmd:sum", nil); got != "server cmd:sum,role:math" {
		t.Errorf("narrower remote pattern: served by %q", got)
	}
	if got := act("role:math,cmd:product", nil); got != "client role:math" {
		t.Errorf("only the wider local pattern matches: served by %q", got)
	}
	if got := act("role:math", map[string]any{"cmd": "sum"}); got != "server cmd:sum,role:math" {
		t.Errorf("narrower remote pattern through the message: served by %q", got)
	}
	if got := act("role:both", nil); got != "client role:both" {
		t.Errorf("same pattern local and remote: served by %q, want the local handler", got)
	}
	// Without the local handler the route still has the remote one.
	if ok, err := cl.Remove("role:both"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if got := act("role:both", nil); got != "server role:both" {
		t.Errorf("after removing the local handler: served by %q", got)
	}
	// Adding it back, over a route that only had the remote handler.
	transporttest.MustAdd(t, cl, "role:both", answer("client"))
	if got := act("role:both", nil); got != "client role:both" {
		t.Errorf("after adding the local handler back: served by %q", got)
	}
}

// TestRemoteCatalogChanges: patterns added and removed on the server become
// routable and unroutable on the client.
func TestRemoteCatalogChanges(t *testing.T) {
	srv := newServer(t)
	transporttest.MustAdd(t, srv, "role:cat,cmd:first", func(ctx context.Context, r runtime.Request) (any, error) { return "first", nil })
	cl := newClient(t, "role:cat,cmd:first", srv.Addr()) // refreshes every 50ms

	transporttest.MustAdd(t, srv, "role:cat,cmd:later", func(ctx context.Context, r runtime.Request) (any, error) { return "later", nil })
	transporttest.WaitRoutable(t, cl, "role:cat,cmd:later")
	if res, err := cl.ActE(t.Context(), "role:cat,cmd:later", nil); err != nil || res.Value() != "later" {
		t.Fatalf("later = %v, %v", res.Value(), err)
	}
	// A glob pattern travels too.
	transporttest.MustAdd(t, srv, "role:cat,cmd:g*", func(ctx context.Context, r runtime.Request) (any, error) { return "glob", nil })
	transporttest.WaitRoutable(t, cl, "role:cat,cmd:go")
	if res, err := cl.Act(t.Context(), "role:cat,cmd:get", nil); err != nil || res.Value() != "glob" {
		t.Fatalf("glob = %v, %v", res.Value(), err)
	}

	if ok, err := srv.Remove("role:cat,cmd:later"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	testwait.Until(t, "the client drops role:cat,cmd:later", func() bool { return !transporttest.Routes(cl, "role:cat,cmd:later") })
	if _, err := cl.ActE(t.Context(), "role:cat,cmd:later", nil); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("after removal: %v", err)
	}
	if !transporttest.Routes(cl, "role:cat,cmd:first") {
		t.Errorf("role:cat,cmd:first left too: %v", cl.Patterns())
	}
	// The system pattern is served, never routed.
	if transporttest.Routes(cl, introspect.CatalogPattern) {
		t.Errorf("the catalog pattern is routed: %v", cl.Patterns())
	}
}

// TestRemoteMaxInFlight: a server over its limit refuses at once.
func TestRemoteMaxInFlight(t *testing.T) {
	srv := newServer(t, runtime.WithMaxInFlight(1))
	started := make(chan struct{})
	release := transporttest.NewGate(t)
	transporttest.MustAdd(t, srv, "role:slow", func(ctx context.Context, r runtime.Request) (any, error) {
		close(started)
		<-release.C()
		return "done", nil
	})
	transporttest.MustAdd(t, srv, "role:fast", func(ctx context.Context, r runtime.Request) (any, error) { return "fast", nil })
	cl := newClient(t, "role:fast", srv.Addr())

	first := make(chan error, 1)
	go func() {
		_, err := cl.ActE(t.Context(), "role:slow", nil)
		first <- err
	}()
	testwait.Recv(t, started)
	_, err := cl.ActE(t.Context(), "role:fast", nil)
	transporttest.WantCode(t, err, runtime.CodeResourceExhausted)
	if !errors.Is(err, runtime.ErrResourceExhausted) {
		t.Errorf("errors.Is(%v, ErrResourceExhausted) = false", err)
	}
	release.Open()
	if err := testwait.Recv(t, first); err != nil {
		t.Errorf("the first call: %v", err)
	}
	if res, err := cl.ActE(t.Context(), "role:fast", nil); err != nil || res.Value() != "fast" {
		t.Errorf("once below the limit: %v, %v", res.Value(), err)
	}
}

// TestRemoteFrameLimit: a request or response above the frame limit fails
// that call alone, with CodeResourceExhausted.
func TestRemoteFrameLimit(t *testing.T) {
	const limit = 64 << 10
	tr := newTransport(t, tcp.WithMaxFrameSize(limit))
	srv := newServer(t, runtime.WithTransport(tr))
	transporttest.MustAdd(t, srv, "role:big,cmd:echo", func(ctx context.Context, r runtime.Request) (any, error) { return r.Msg(), nil })
	transporttest.MustAdd(t, srv, "role:big,cmd:make", func(ctx context.Context, r runtime.Request) (any, error) {
		return map[string]any{"s": strings.Repeat("x", limit)}, nil
	})
	cl := newClientWith(t, "role:big,cmd:make", []runtime.Option{runtime.WithTransport(tr)}, srv.Addr())

	_, err := cl.ActE(t.Context(), "role:big,cmd:echo", map[string]any{"s": strings.Repeat("x", limit)})
	transporttest.WantCode(t, err, runtime.CodeResourceExhausted)
	_, err = cl.ActE(t.Context(), "role:big,cmd:make", nil)
	transporttest.WantCode(t, err, runtime.CodeResourceExhausted)
	if !strings.Contains(err.Error(), "exceeds the frame limit") {
		t.Errorf("err = %v", err)
	}
	// The connection is fine.
	res, err := cl.ActE(t.Context(), "role:big,cmd:echo", map[string]any{"s": "small"})
	if err != nil || res.Value().(map[string]any)["s"] != "small" {
		t.Errorf("after: %v, %v", res.Value(), err)
	}
}
