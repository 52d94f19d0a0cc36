package tcp_test

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
)

// TestOverlayConsistent: what a handler reads with Request.Get and what it
// decodes agree on a message overlaid by its pattern (Act), for calls made
// in-process and for raw calls that carry the overlay ("o") themselves.
func TestOverlayConsistent(t *testing.T) {
	srv := newServer(t)
	transporttest.MustAdd(t, srv, "role:acct", func(ctx context.Context, req runtime.Request) (any, error) {
		var m map[string]any
		if err := req.Decode(&m); err != nil {
			var s wrapperspb.StringValue
			if err := req.Decode(&s); err != nil {
				return nil, err
			}
			m = map[string]any{"value": s.GetValue()}
		}
		return map[string]any{"get": fmt.Sprintf("%v %v", req.Get("key"), req.Get("value")), "decoded": fmt.Sprintf("%v %v", m["key"], m["value"])}, nil
	})
	conn, err := newTransport(t).Dial(t.Context(), srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	send := func(m *runtime.Message) (string, runtime.Code) {
		t.Helper()
		m.Pattern = "role:acct"
		reply, err := conn.Call(t.Context(), m)
		if err != nil {
			t.Fatal(err)
		}
		return string(reply.Payload), reply.Code
	}

	t.Run("JSON payload", func(t *testing.T) {
		got, code := send(&runtime.Message{Codec: runtime.CodecJSON, Payload: []byte(`{"key":"alice"}`), Meta: []runtime.MetaPair{{Key: ":o", Value: "key:root,role:acct"}}})
		if code != runtime.CodeOK || got != `{"decoded":"root \u003cnil\u003e","get":"root \u003cnil\u003e"}` {
			t.Errorf("the handler saw %s (%v); want root through Get and Decode", got, code)
		}
	})
	t.Run("protobuf payload contradicting the overlay", func(t *testing.T) {
		b, _ := proto.Marshal(wrapperspb.String("alice"))
		got, code := send(&runtime.Message{Codec: runtime.CodecProto, Payload: b, Meta: []runtime.MetaPair{{Key: ":t", Value: "google.protobuf.StringValue"}, {Key: ":o", Value: "role:acct,value:root"}}})
		if code != runtime.CodeInvalidArgument {
			t.Errorf("the handler saw %s (%v); want invalid_argument", got, code)
		}
	})
	t.Run("in-process Act", func(t *testing.T) {
		_, err := srv.Act(t.Context(), "role:acct,value:root", wrapperspb.String("alice"))
		transporttest.WantCode(t, err, runtime.CodeInvalidArgument)
		res, err := srv.Act(t.Context(), "role:acct,value:alice", wrapperspb.String("alice"))
		if err != nil || fmt.Sprint(res.Value()) != "map[decoded:<nil> alice get:<nil> alice]" {
			t.Errorf("Act with an agreeing message = %v, %v", res.Value(), err)
		}
	})
}
