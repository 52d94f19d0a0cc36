package nats_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/natstest"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
	"github.com/wizardmesh/wizard/runtime/nats"
)

// TestMalformedMessagesDropped: a foreign publisher floods a node's
// subject with malformed, oversized and unexpected messages, with and
// without reply subjects; the node drops each one, logs them within the
// rate limit, and serves calls all the while.
func TestMalformedMessagesDropped(t *testing.T) {
	b := natstest.Start(t)
	var log testlog.Buffer
	srv := transporttest.NewServer(t, newTransport(t, b.URL(), nats.WithLogger(log.Logger()), nats.WithMaxFrameSize(4096)))
	transporttest.MustAdd(t, srv, "role:echo", func(ctx context.Context, r runtime.Request) (any, error) { return "ok", nil })
	cl := transporttest.NewClient(t, newTransport(t, b.URL()), "role:echo", nil, srv.Addr())

	raw, err := natsgo.Connect(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	manyMeta := binary.BigEndian.AppendUint32(nil, 40)
	manyMeta = append(manyMeta, byte(wire.TypeRequest), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	manyMeta = binary.AppendUvarint(manyMeta, 1<<40) // a meta count no message can hold
	bad := [][]byte{
		nil,
		[]byte("hello"),
		{0xff, 0xff, 0xff, 0xff, 1, 2, 3},     // a length field past the data
		binary.BigEndian.AppendUint32(nil, 3), // a length field, nothing after it
		append(binary.BigEndian.AppendUint32(nil, 11), make([]byte, 11)...), // type 0
		manyMeta,
		wire.AppendFrame(nil, &wire.Frame{Type: wire.TypeResponse}),                             // not for a node's subject
		wire.AppendFrame(nil, &wire.Frame{Type: wire.TypeRequest, Payload: make([]byte, 8192)}), // over the limit
	}
	start := time.Now()
	const rounds = 30
	events := 0
	for i := range rounds {
		for j, data := range bad {
			var err error
			if j%2 == 0 {
				err = raw.PublishRequest(srv.Addr(), raw.NewInbox(), data)
			} else {
				err = raw.Publish(srv.Addr(), data)
			}
			if err != nil {
				t.Fatal(err)
			}
			events++
		}
		if i%10 == 0 {
			if res, err := cl.ActE(t.Context(), "role:echo", nil); err != nil || res.Value() != "ok" {
				t.Fatalf("a call amid the flood: %v, %v", res.Value(), err)
			}
		}
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	// The flood is behind the last call: messages on one subject from one
	// connection arrive in order.
	if res, err := cl.ActE(t.Context(), "role:echo", nil); err != nil || res.Value() != "ok" {
		t.Fatalf("a call after the flood: %v, %v", res.Value(), err)
	}
	// The records of a rate limiter are complete once it closes.
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	testlog.CheckLimited(t, log.String(), "malformed message dropped", "", events, time.Since(start))
}
