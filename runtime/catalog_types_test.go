package runtime

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/wizardmesh/wizard/runtime/introspect"
	"github.com/wizardmesh/wizard/runtime/pattern"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// echoMethod is a method taking google.protobuf.StringValue and answering
// google.protobuf.Int64Value.
var echoMethod = func() protoreflect.MethodDescriptor {
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:       proto.String("catalog_types_test/echo.proto"),
		Package:    proto.String("wizard.cattest.v1"),
		Syntax:     proto.String("proto3"),
		Dependency: []string{"google/protobuf/wrappers.proto"},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Echo"),
			Method: []*descriptorpb.MethodDescriptorProto{{
				Name: proto.String("Len"), InputType: proto.String(".google.protobuf.StringValue"), OutputType: proto.String(".google.protobuf.Int64Value"),
			}},
		}},
	}, protoregistry.GlobalFiles)
	if err != nil {
		panic(err)
	}
	return fd.Services().Get(0).Methods().Get(0)
}()

// TestCatalogTypes: a node lists the types of its handlers added with
// Method; they count in its digest; a peer's catalog with types that are
// not its patterns' or not message names is rejected whole.
func TestCatalogTypes(t *testing.T) {
	n, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	h := func(ctx context.Context, r Request) (any, error) { return nil, nil }
	if err := n.Add("role:echo,cmd:len", h, Method(echoMethod)); err != nil {
		t.Fatal(err)
	}
	untyped := digestOf(n.localPatterns())
	if err := n.Add("role:plain", h); err != nil {
		t.Fatal(err)
	}
	c, pats, err := readCatalog(n.serveRemote(context.Background(), &Message{Pattern: introspect.CatalogPattern}).Payload, "", nil, &testLimits, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := catalogTypes{"cmd:len,role:echo": {"google.protobuf.StringValue", "google.protobuf.Int64Value"}}
	if diff := cmp.Diff(want, c.types, cmp.AllowUnexported(typeNames{})); diff != "" {
		t.Errorf("types (-want +got):\n%s", diff)
	}
	if len(pats) != 2 || c.Digest != n.digest() || c.Digest == digestOf(pats) || untyped == digestOf(pats) {
		t.Errorf("digest %s (node %s, untyped %s): the types must count in it", c.Digest, n.digest(), digestOf(pats))
	}
	for _, tc := range []struct{ name, catalog, says string }{
		{"types of another pattern", `{"id":"x","patterns":["role:a"],"types":{"role:b":["a.B","a.C"]}}`, `types for "role:b", not one of its patterns`},
		{"not canonical", `{"id":"x","patterns":["b:1,a:1"],"types":{"b:1,a:1":["a.B","a.C"]}}`, "not one of its patterns (in canonical form)"},
		{"not a message name", `{"id":"x","patterns":["role:a"],"types":{"role:a":["a B","a.C"]}}`, `"a B" is not a protobuf message name`},
		{"empty name", `{"id":"x","patterns":["role:a"],"types":{"role:a":["","a.C"]}}`, `"" is not a protobuf message name`},
		{"wrong digest", `{"id":"x","digest":"` + digestOf([]pattern.Pattern{pattern.MustParse("role:a")}) + `","patterns":["role:a"],"types":{"role:a":["a.B","a.C"]}}`, "does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := decodeCatalog([]byte(tc.catalog), &testLimits); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("decodeCatalog = %v, want an error saying %q", err, tc.says)
			}
		})
	}
}
