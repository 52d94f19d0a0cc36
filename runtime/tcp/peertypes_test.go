package tcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
)

// unlinked is a service whose messages no registry of this binary knows,
// as a gateway's binary does not link the services behind it.
var unlinked = func() protoreflect.ServiceDescriptor {
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:    proto.String("peertypes_test/greet.proto"),
		Package: proto.String("wizard.peertypes.v1"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("Hello"), Field: []*descriptorpb.FieldDescriptorProto{{Name: proto.String("name"), JsonName: proto.String("name"), Number: proto.Int32(1), Label: opt, Type: str}}},
			{Name: proto.String("Greeting"), Field: []*descriptorpb.FieldDescriptorProto{{Name: proto.String("text"), JsonName: proto.String("text"), Number: proto.Int32(1), Label: opt, Type: str}}},
		},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name:   proto.String("Greeter"),
			Method: []*descriptorpb.MethodDescriptorProto{{Name: proto.String("Greet"), InputType: proto.String(".wizard.peertypes.v1.Hello"), OutputType: proto.String(".wizard.peertypes.v1.Greeting")}},
		}},
	}, nil)
	if err != nil {
		panic(err)
	}
	return fd.Services().Get(0)
}()

// TestPeerTypes: a node with WithPeerTypes decodes a peer's answers of a
// type its binary does not link into JSON; without it, it cannot.
func TestPeerTypes(t *testing.T) {
	md := unlinked.Methods().Get(0)
	srv := newServer(t)
	if err := srv.Add("role:greet", func(ctx context.Context, r runtime.Request) (any, error) {
		out := dynamicpb.NewMessage(md.Output())
		out.Set(md.Output().Fields().ByName("text"), protoreflect.ValueOfString("hello, ada"))
		return out, nil
	}, runtime.Method(md)); err != nil {
		t.Fatal(err)
	}
	call := func(opts ...runtime.Option) (string, error) {
		cl := transporttest.NewClient(t, newTransport(t), "role:greet", opts, srv.Addr())
		res, err := cl.ActE(t.Context(), "role:greet", map[string]any{"name": "ada"})
		if err != nil {
			return "", err
		}
		var out json.RawMessage
		if err := res.Decode(&out); err != nil {
			return "", err
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			return "", err
		}
		return m["text"].(string), nil
	}
	if _, err := call(); err == nil || !strings.Contains(err.Error(), `unknown type "wizard.peertypes.v1.Greeting"`) {
		t.Errorf("without WithPeerTypes: %v, want the unknown type named", err)
	}
	got, err := call(runtime.WithPeerTypes())
	if err != nil || got != "hello, ada" {
		t.Errorf("with WithPeerTypes: %q, %v", got, err)
	}
}
