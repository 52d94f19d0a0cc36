package runtime

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestReplyBodyOnceForEveryTransport: a protobuf result left unencoded
// for a transport that encodes it into its frame is stored unencoded by
// the de-duplication table; a copy of the call through a transport that
// does not encode it gets the encoded payload, a copy through one that
// does gets the result, and the handler runs once.
func TestReplyBodyOnceForEveryTransport(t *testing.T) {
	n, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.dedup = newDedupTable(8, time.Minute)
	var runs atomic.Int64
	echo := func(_ context.Context, req *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error) {
		runs.Add(1)
		return &wrapperspb.BytesValue{Value: req.GetValue()}, nil
	}
	if err := n.Add("role:t,cmd:echo", NewUnaryHandler(echo)); err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte("x"), 100<<10)
	want, _ := proto.Marshal(wrapperspb.Bytes(value))
	var id [8]byte
	binary.BigEndian.PutUint64(id[:], 9)
	call := func() *Message {
		return &Message{
			Pattern: "cmd:echo,role:t", Flags: FlagKeep, Codec: CodecProto, Payload: want,
			Meta: []MetaPair{{metaType, "google.protobuf.BytesValue"}, {metaCall, string(id[:])}, {metaToken, strings.Repeat("k", tokenSize)}},
		}
	}
	s := nodeServer{n}
	check := func(name string, reply *Message, body proto.Message, size int, deferred bool) {
		t.Helper()
		if reply == nil || reply.Code != CodeOK {
			t.Fatalf("%s: reply %+v", name, reply)
		}
		if got := metaValue(reply.Meta, metaType); got != "google.protobuf.BytesValue" {
			t.Errorf("%s: type %q", name, got)
		}
		if deferred {
			if body == nil || reply.Payload != nil || size != len(want) {
				t.Fatalf("%s: body %v, payload of %d bytes, size %d; want the result unencoded, %d bytes", name, body != nil, len(reply.Payload), size, len(want))
			}
			if got, _ := proto.Marshal(body); !bytes.Equal(got, want) {
				t.Errorf("%s: the body encodes otherwise", name)
			}
		} else if !bytes.Equal(reply.Payload, want) || reply.body != nil {
			t.Errorf("%s: payload of %d bytes (body %v), want the %d bytes encoded", name, len(reply.Payload), reply.body != nil, len(want))
		}
	}
	reply, body, size, _ := s.ServeMessageBody(t.Context(), call())
	check("first, deferred", reply, body, size, true)
	check("copy, encoded", s.ServeMessage(t.Context(), call()), nil, 0, false)
	reply, body, size, _ = s.ServeMessageBody(t.Context(), call())
	check("copy, deferred", reply, body, size, true)
	if r := runs.Load(); r != 1 {
		t.Errorf("the handler ran %d times, want once", r)
	}
}

// TestPlainMessage: only messages whose encoding cannot fail are left to
// the transport: no strings, nested messages, maps or required fields.
func TestPlainMessage(t *testing.T) {
	for _, c := range []struct {
		m    proto.Message
		want bool
	}{
		{&wrapperspb.BytesValue{}, true},
		{&wrapperspb.Int64Value{}, true},
		{&wrapperspb.StringValue{}, false}, // invalid UTF-8 fails
		{&structpb.Struct{}, false},        // a map of messages
		{&structpb.ListValue{}, false},     // nested messages
	} {
		md := c.m.ProtoReflect().Descriptor()
		for range 2 { // computed, then cached
			if got := plainMessage(md); got != c.want {
				t.Errorf("plainMessage(%s) = %v, want %v", md.FullName(), got, c.want)
			}
		}
	}
}
