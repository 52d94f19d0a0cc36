package parity_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpki"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/quic"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// unregistered is a message type no registry knows: a detail of this type
// reaches a remote caller as a google.protobuf.Any it cannot unpack by
// itself.
var unregistered = func() protoreflect.MessageDescriptor {
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:    proto.String("parity/unregistered.proto"),
		Package: proto.String("wizard.parity.v1"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("Reason"),
			Field: []*descriptorpb.FieldDescriptorProto{{
				Name:     proto.String("why"),
				JsonName: proto.String("why"),
				Number:   proto.Int32(1),
				Label:    descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
				Type:     descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(),
			}},
		}},
	}, nil)
	if err != nil {
		panic(err)
	}
	return fd.Messages().Get(0)
}()

func reason(why string) *dynamicpb.Message {
	m := dynamicpb.NewMessage(unregistered)
	m.Set(unregistered.Fields().ByName("why"), protoreflect.ValueOfString(why))
	return m
}

// seen describes a value as a handler saw it: its Go type and value.
func seen(v any) string { return fmt.Sprintf("%T %v", v, v) }

// getter describes what a typed getter returned.
func getter[T any](v T, ok bool) string { return fmt.Sprintf("%v %v", v, ok) }

// addHandlers adds the suite to n.
func addHandlers(t *testing.T, n *runtime.Node) {
	t.Helper()
	add := func(pattern string, h runtime.Handler) { transporttest.MustAdd(t, n, pattern, h) }
	// What a handler reads of a map message, by Get and the typed getters.
	add("role:parity,cmd:read", func(ctx context.Context, r runtime.Request) (any, error) {
		out := map[string]string{}
		for _, k := range []string{"a", "b", "f32", "num", "u8", "s", "t", "nested", "list", "v", "missing"} {
			out["Get "+k] = seen(r.Get(k))
		}
		for _, k := range []string{"a", "f32", "num", "u8", "s", "v", "half", "t", "nested"} {
			out["Float64 "+k] = getter(r.Float64(k))
			out["Int64 "+k] = getter(r.Int64(k))
			out["String "+k] = getter(r.String(k))
		}
		for _, k := range []string{"t", "tstr", "a"} {
			out["Bool "+k] = getter(r.Bool(k))
		}
		return out, nil
	})
	// The package doc's handler.
	add("role:parity,cmd:sum", func(ctx context.Context, r runtime.Request) (any, error) {
		return map[string]any{"r": r.Get("a").(float64) + r.Get("b").(float64)}, nil
	})
	add("role:parity,cmd:coded", func(ctx context.Context, r runtime.Request) (any, error) {
		return nil, &runtime.Error{Code: runtime.CodeFailedPrecondition, Message: "wizard: out of stock",
			Details: []proto.Message{wrapperspb.String("sku-1"), reason("restock on monday")}}
	})
	add("role:parity,cmd:plain", func(ctx context.Context, r runtime.Request) (any, error) {
		return nil, errors.New("a plain error")
	})
	add("role:parity,cmd:panic", func(ctx context.Context, r runtime.Request) (any, error) {
		panic("boom")
	})
	add("role:parity,cmd:nil", func(ctx context.Context, r runtime.Request) (any, error) { return nil, nil })
	add("role:parity,cmd:nilptr", func(ctx context.Context, r runtime.Request) (any, error) {
		return (*wrapperspb.StringValue)(nil), nil
	})
	// What a handler sees of its call's metadata and caller; relay calls
	// it with its own ctx, forward with what it received copied.
	add("role:parity,cmd:meta", func(ctx context.Context, r runtime.Request) (any, error) {
		return map[string]string{"in": runtime.IncomingMetadata(ctx).String(), "caller": r.Source().Node}, nil
	})
	add("role:parity,cmd:relay", func(ctx context.Context, r runtime.Request) (any, error) {
		res, err := n.Act(ctx, "role:parity,cmd:meta", nil)
		return res.Value(), err
	})
	add("role:parity,cmd:forward", func(ctx context.Context, r runtime.Request) (any, error) {
		res, err := n.Act(runtime.WithMetadata(ctx, runtime.IncomingMetadata(ctx)), "role:parity,cmd:meta", nil)
		return res.Value(), err
	})
	add("role:parity,cmd:typednil", runtime.NewUnaryHandler(func(ctx context.Context, r *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
		return nil, nil
	}))
}

// outcome is what a case observed, comparable across columns.
type outcome struct {
	Value   any
	Code    string
	Message string
	Details []string // DetailAs and AnyDetails, described
}

func outcomeOf(v any, err error) outcome {
	o := outcome{Value: v, Code: runtime.CodeOf(err).String()}
	if err == nil {
		return o
	}
	o.Message = err.Error()
	var e *runtime.Error
	if errors.As(err, &e) {
		var sku wrapperspb.StringValue
		o.Details = append(o.Details, fmt.Sprintf("DetailAs StringValue: %v %q", e.DetailAs(&sku), sku.GetValue()))
		r := dynamicpb.NewMessage(unregistered)
		o.Details = append(o.Details, fmt.Sprintf("DetailAs Reason: %v %q", e.DetailAs(r), r.Get(unregistered.Fields().ByName("why")).String()))
		for _, a := range e.AnyDetails() {
			o.Details = append(o.Details, "Any "+a.GetTypeUrl())
		}
	}
	return o
}

// incoming is the outcome of a call of role:parity,cmd:meta: the
// metadata it saw.
func incoming(res runtime.Result, err error) outcome {
	o := decoded[map[string]string](res, err)
	if m, ok := o.Value.(map[string]string); ok {
		o.Value = m["in"]
	}
	return o
}

// decoded decodes a call's result into a new T.
func decoded[T any](res runtime.Result, err error) outcome {
	if err != nil {
		return outcomeOf(nil, err)
	}
	var out T
	if err := res.Decode(&out); err != nil {
		return outcomeOf(nil, fmt.Errorf("decode: %w", err))
	}
	return outcomeOf(out, nil)
}

// typed calls pattern with a typed client and describes the response.
func typed(t *testing.T, n *runtime.Node, pattern string) outcome {
	c := transporttest.TypedClient[wrapperspb.StringValue, wrapperspb.StringValue](t, n, pattern)
	out, err := c.Call(t.Context(), wrapperspb.String("x"))
	if err != nil {
		return outcomeOf(nil, err)
	}
	if out == nil {
		return outcomeOf("nil *StringValue", nil)
	}
	return outcomeOf(fmt.Sprintf("empty: %v", proto.Size(out) == 0), nil)
}

// readMsg is the map message the read cases send, as a Go caller builds
// it: Go ints and other numeric types, a nested map of ints.
func readMsg() map[string]any {
	return map[string]any{
		"a": 1, "b": 2, "f32": float32(0.1), "num": json.Number("3"), "u8": uint8(7),
		"s": "2", "half": 2.5, "t": true, "tstr": "false",
		"nested": map[string]any{"x": 1}, "list": []int{1, 2},
	}
}

// readWant is what the read handler sees of readMsg, everywhere.
var readWant = map[string]string{
	"Get a": "float64 1", "Get b": "float64 2", "Get f32": "float64 0.1", "Get num": "float64 3",
	"Get u8": "float64 7", "Get s": "string 2", "Get t": "bool true",
	"Get nested": "map[string]interface {} map[x:1]", "Get list": "[]interface {} [1 2]",
	"Get v": "string 2", "Get missing": "<nil> <nil>",
	"Float64 a": "1 true", "Int64 a": "1 true", "String a": "1 true",
	"Float64 f32": "0.1 true", "Int64 f32": "0 false", "String f32": "0.1 true",
	"Float64 num": "3 true", "Int64 num": "3 true", "String num": "3 true",
	"Float64 u8": "7 true", "Int64 u8": "7 true", "String u8": "7 true",
	"Float64 s": "2 true", "Int64 s": "2 true", "String s": "2 true",
	"Float64 v": "2 true", "Int64 v": "2 true", "String v": "2 true",
	"Float64 half": "2.5 true", "Int64 half": "0 false", "String half": "2.5 true",
	"Float64 t": "0 false", "Int64 t": "0 false", "String t": "true true",
	"Float64 nested": "0 false", "Int64 nested": "0 false", "String nested": " false",
	"Bool t": "true true", "Bool tstr": "false true", "Bool a": "false false",
}

// withMeta is the test's ctx with the metadata the metadata cases send.
func withMeta(t *testing.T) context.Context {
	return runtime.AppendMetadata(t.Context(), "x-a", "1", "x-a", "2", "x-sig-bin", "\x00\n")
}

// TestInProcessAndRemote runs the handler suite in-process, over TCP and
// over QUIC: every case has the same outcome in every column.
func TestInProcessAndRemote(t *testing.T) {
	pki := testpki.New(t)
	columns := []struct {
		name string
		tr   func(t *testing.T) runtime.Transport // nil: in-process
	}{
		{"in-process", nil},
		{"tcp", func(t *testing.T) runtime.Transport {
			tr, err := tcp.New(tcp.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			return tr
		}},
		{"quic", func(t *testing.T) runtime.Transport {
			tr, err := quic.New(quic.WithServerTLS(pki.ServerConfig()), quic.WithClientTLS(pki.ClientConfig()), quic.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			return tr
		}},
	}
	cases := []struct {
		name string
		call func(t *testing.T, n *runtime.Node) outcome
		want outcome
	}{
		{"Act map: Get and getters", func(t *testing.T, n *runtime.Node) outcome {
			return decoded[map[string]string](n.Act(t.Context(), "role:parity,cmd:read,v:2", readMsg()))
		}, outcome{Value: readWant, Code: "ok"}},
		{"ActE map: Get and getters", func(t *testing.T, n *runtime.Node) outcome {
			m := readMsg()
			m["v"] = "2"
			return decoded[map[string]string](n.ActE(t.Context(), "role:parity,cmd:read", m))
		}, outcome{Value: readWant, Code: "ok"}},
		{"Act JSON: Get and getters", func(t *testing.T, n *runtime.Node) outcome {
			b, err := json.Marshal(readMsg())
			if err != nil {
				t.Fatal(err)
			}
			return decoded[map[string]string](n.Act(t.Context(), "role:parity,cmd:read,v:2", b))
		}, outcome{Value: readWant, Code: "ok"}},
		{"the package doc's handler", func(t *testing.T, n *runtime.Node) outcome {
			return decoded[struct{ R float64 }](n.Act(t.Context(), "role:parity,cmd:sum", map[string]any{"a": 1, "b": 2}))
		}, outcome{Value: struct{ R float64 }{3}, Code: "ok"}},
		{"coded error with details", func(t *testing.T, n *runtime.Node) outcome {
			return decoded[any](n.ActE(t.Context(), "role:parity,cmd:coded", nil))
		}, outcome{Code: "failed_precondition", Message: "wizard: out of stock", Details: []string{
			`DetailAs StringValue: true "sku-1"`, `DetailAs Reason: true "restock on monday"`,
			"Any type.googleapis.com/google.protobuf.StringValue", "Any type.googleapis.com/wizard.parity.v1.Reason",
		}}},
		{"plain error", func(t *testing.T, n *runtime.Node) outcome {
			return decoded[any](n.ActE(t.Context(), "role:parity,cmd:plain", nil))
		}, outcome{Code: "unknown", Message: "a plain error", Details: []string{`DetailAs StringValue: false ""`, `DetailAs Reason: false ""`}}},
		{"panicking handler", func(t *testing.T, n *runtime.Node) outcome {
			return decoded[any](n.ActE(t.Context(), "role:parity,cmd:panic", nil))
		}, outcome{Code: "internal", Message: `wizard: handler for "cmd:panic,role:parity" panicked`, Details: []string{`DetailAs StringValue: false ""`, `DetailAs Reason: false ""`}}},
		{"nil, nil: untyped", func(t *testing.T, n *runtime.Node) outcome {
			res, err := n.ActE(t.Context(), "role:parity,cmd:nil", nil)
			return outcomeOf(seen(res.Value()), err)
		}, outcome{Value: "<nil> <nil>", Code: "ok"}},
		{"nil, nil: typed client", func(t *testing.T, n *runtime.Node) outcome {
			return typed(t, n, "role:parity,cmd:nil")
		}, outcome{Value: "empty: true", Code: "ok"}},
		{"nil *Res: typed client", func(t *testing.T, n *runtime.Node) outcome {
			return typed(t, n, "role:parity,cmd:nilptr")
		}, outcome{Value: "empty: true", Code: "ok"}},
		{"metadata and caller reach the handler", func(t *testing.T, n *runtime.Node) outcome {
			o := decoded[map[string]string](n.Act(withMeta(t), "role:parity,cmd:meta", nil))
			if m, ok := o.Value.(map[string]string); ok {
				m["caller"] = fmt.Sprint(m["caller"] == n.ID())
			}
			return o
		}, outcome{Value: map[string]string{"in": `x-a="1" x-a="2" x-sig-bin=(2 bytes)`, "caller": "true"}, Code: "ok"}},
		{"metadata stays with the handler", func(t *testing.T, n *runtime.Node) outcome {
			return incoming(n.Act(withMeta(t), "role:parity,cmd:relay", nil))
		}, outcome{Value: "", Code: "ok"}},
		{"metadata copied on", func(t *testing.T, n *runtime.Node) outcome {
			return incoming(n.Act(withMeta(t), "role:parity,cmd:forward", nil))
		}, outcome{Value: `x-a="1" x-a="2" x-sig-bin=(2 bytes)`, Code: "ok"}},
		{"a bad metadata key", func(t *testing.T, n *runtime.Node) outcome {
			return decoded[any](n.Act(runtime.AppendMetadata(t.Context(), "X-A", "1"), "role:parity,cmd:meta", nil))
		}, outcome{Code: "invalid_argument", Message: `wizard: metadata key "X-A": keys are lower-case ASCII letters, digits, '-', '_' and '.' (byte 0 is 'X')`,
			Details: []string{`DetailAs StringValue: false ""`, `DetailAs Reason: false ""`}}},
		{"typed handler's nil, nil: typed client", func(t *testing.T, n *runtime.Node) outcome {
			return typed(t, n, "role:parity,cmd:typednil")
		}, outcome{Value: "empty: true", Code: "ok"}},
	}

	got := make([]map[string]outcome, len(columns))
	for i, col := range columns {
		got[i] = map[string]outcome{}
		t.Run(col.name, func(t *testing.T) {
			var caller *runtime.Node
			if col.tr == nil {
				caller = transporttest.NewNode(t)
				addHandlers(t, caller)
			} else {
				srv := transporttest.NewServer(t, col.tr(t))
				addHandlers(t, srv)
				caller = transporttest.NewClient(t, col.tr(t), "role:parity,cmd:typednil", nil, srv.Addr())
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					o := tc.call(t, caller)
					got[i][tc.name] = o
					if diff := cmp.Diff(tc.want, o); diff != "" {
						t.Errorf("%s (-want +got):\n%s", col.name, diff)
					}
				})
			}
		})
	}
	// The columns agree with one another too (a case may differ from want
	// in the same way everywhere: that is a wrong want, not a divergence).
	for i := 1; i < len(columns); i++ {
		if diff := cmp.Diff(got[0], got[i]); diff != "" {
			t.Errorf("%s and %s differ (-%s +%s):\n%s", columns[0].name, columns[i].name, columns[0].name, columns[i].name, diff)
		}
	}
}
