package runtime

import (
	"bytes"
	"context"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// sendConn is a Conn that records what it was given; with body set it
// also encodes protobuf requests itself.
type sendConn struct {
	got  *Message
	body proto.Message
	size int
}

func (c *sendConn) Call(_ context.Context, m *Message) (*Message, error) {
	c.got = m
	return &Message{}, nil
}
func (c *sendConn) Done() <-chan struct{} { return nil }
func (c *sendConn) Close() error          { return nil }

type sendBodyConn struct{ sendConn }

func (c *sendBodyConn) CallBody(_ context.Context, m *Message, body proto.Message, size int) (*Message, error) {
	c.got, c.body, c.size = m, body, size
	return &Message{}, nil
}

// TestSendLeavesBodyToConn: a plain protobuf request stays unencoded for
// a connection that encodes it itself; any other connection gets its
// payload encoded, which later attempts reuse; other requests are
// encoded as before.
func TestSendLeavesBodyToConn(t *testing.T) {
	req := wrapperspb.Bytes(bytes.Repeat([]byte("r"), 1000))
	want, _ := proto.Marshal(req)
	codec, payload, typ, body, err := encodeRequest(req)
	if err != nil || codec != CodecProto || payload != nil || typ != "google.protobuf.BytesValue" || body.m != req || body.n != len(want) {
		t.Fatalf("encodeRequest = %v, %d bytes, %q, %v, %v", codec, len(payload), typ, body, err)
	}
	m := &Message{Codec: codec, body: body.m, bodyLen: body.n}
	bc := new(sendBodyConn)
	if _, err := send(t.Context(), bc, m); err != nil || bc.body != req || bc.size != len(want) || m.Payload != nil {
		t.Fatalf("a body connection got body %v (size %d), payload of %d bytes, err %v", bc.body != nil, bc.size, len(m.Payload), err)
	}
	c := new(sendConn)
	if _, err := send(t.Context(), c, m); err != nil || !bytes.Equal(c.got.Payload, want) || m.body != nil {
		t.Fatalf("another connection got a payload of %d bytes (body left %v), err %v", len(c.got.Payload), m.body != nil, err)
	}
	if _, err := send(t.Context(), bc, m); err != nil || bc.got.Payload == nil || !bytes.Equal(bc.got.Payload, want) {
		t.Errorf("a later attempt did not reuse the encoded payload")
	}
	if _, payload, _, body, _ := encodeRequest(wrapperspb.String("s")); body.m != nil || len(payload) == 0 {
		t.Errorf("a message with a string was left unencoded")
	}
}
