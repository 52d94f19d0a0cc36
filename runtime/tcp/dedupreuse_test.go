package tcp_test

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The de-duplication table keeps nothing of a call's record, which a
// typed handler's request gives back to be reused: a call sent again
// after many other calls reused the records gets the answer stored for
// it, and its handler ran once.
func TestDedupAnswerOutlivesReusedRecords(t *testing.T) {
	var runs atomic.Int64
	srv := newServer(t)
	transporttest.MustAdd(t, srv, "role:echo", runtime.NewUnaryHandler(func(_ context.Context, r *wrapperspb.Int64Value) (*wrapperspb.Int64Value, error) {
		runs.Add(1)
		return wrapperspb.Int64(r.GetValue() * 2), nil
	}))
	var id [8]byte
	binary.BigEndian.PutUint64(id[:], 42)
	payload, err := proto.Marshal(wrapperspb.Int64(21))
	if err != nil {
		t.Fatal(err)
	}
	call := func() int64 {
		t.Helper()
		conn, err := newTransport(t).Dial(t.Context(), srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		reply, err := conn.Call(t.Context(), &runtime.Message{
			Pattern: "role:echo",
			Flags:   runtime.FlagKeep,
			Codec:   runtime.CodecProto,
			Payload: payload,
			Meta: []runtime.MetaPair{{Key: ":c", Value: "caller"}, {Key: ":t", Value: "google.protobuf.Int64Value"},
				{Key: ":i", Value: string(id[:])}, {Key: ":k", Value: "0123456789abcdef"}},
		})
		if err != nil || reply.Code != runtime.CodeOK {
			t.Fatalf("call = %+v, %v", reply, err)
		}
		var out wrapperspb.Int64Value
		if err := proto.Unmarshal(reply.Payload, &out); err != nil {
			t.Fatal(err)
		}
		return out.GetValue()
	}
	if got := call(); got != 42 {
		t.Fatalf("first call answered %d, want 42", got)
	}
	cl := newClient(t, "role:echo", srv.Addr())
	c, err := runtime.NewClient[wrapperspb.Int64Value, wrapperspb.Int64Value](cl, "role:echo")
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(200) { // not idempotent: through the table too
		if res, err := c.Call(t.Context(), wrapperspb.Int64(1000+i)); err != nil || res.GetValue() != 2*(1000+i) {
			t.Fatal(res, err)
		}
	}
	if got, n := call(), runs.Load(); got != 42 || n != 201 {
		t.Errorf("the call sent again answered %d after %d runs; want the stored 42 after 201", got, n)
	}
}
