package nats

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// FuzzDecodeFrame feeds arbitrary message data to the decoder a node
// runs on every message on its subject: it never panics, rejects data
// over the limit before decoding, and what it accepts encodes back to
// the same bytes.
func FuzzDecodeFrame(f *testing.F) {
	for _, fr := range []wire.Frame{
		{Type: wire.TypeRequest, Flags: wire.FlagKeep, Codec: wire.CodecJSON, Pattern: "cmd:sum,role:math", Meta: []wire.Meta{{Key: ":c", Value: "node"}}, Payload: []byte(`{"a":1}`)},
		{Type: wire.TypePing},
		{Type: wire.TypeCancel},
		{Type: wire.TypeError, Flags: wire.FlagRefused, Payload: wire.AppendError(nil, 8, "over")},
		{Type: wire.TypePong, ID: batchVersion, Payload: []byte{byte(wire.FeatureStreams)}},
		{Type: wire.TypeStreamOpen, ID: 1, Deadline: time.Second, Pattern: "cmd:watch", Meta: []wire.Meta{{Key: "k", Value: "v"}}},
		{Type: wire.TypeStreamData, ID: 2, Codec: wire.CodecProto, Payload: []byte{8, 1}},
		{Type: wire.TypeStreamClose, ID: 3},
		{Type: wire.TypeStreamCredit, ID: 4, Payload: wire.AppendCredit(nil, 1<<17)},
		{Type: wire.TypeStreamHeader, ID: 1, Meta: []wire.Meta{{Key: "h", Value: "1"}}},
		{Type: wire.TypeStreamEnd, ID: 5, Meta: []wire.Meta{{Key: "t", Value: "2"}}, Payload: wire.AppendError(nil, 9, "no")},
	} {
		f.Add(encodeFrame(&fr))
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 1, 1})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	const max = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		var fr wire.Frame
		err := decodeFrame(data, max, &fr)
		if err != nil {
			return
		}
		if len(data)-4 > max {
			t.Fatalf("accepted %d bytes over the limit %d", len(data)-4, max)
		}
		if len(fr.Meta) > wire.MaxMeta {
			t.Fatalf("%d metadata pairs", len(fr.Meta))
		}
		if again := encodeFrame(&fr); !bytes.Equal(again, data) {
			t.Fatalf("decoded %+v, which encodes to %x, not %x", fr, again, data)
		}
	})
}

// FuzzDecodeBatch feeds arbitrary message data to the checks a node and
// a caller run on every message: checkBatch never panics, and what it
// accepts is at most maxBatchFrames frames, each within the limit, that
// nextFrame decodes in turn and that encode back to the same bytes.
func FuzzDecodeBatch(f *testing.F) {
	req := wire.Frame{Type: wire.TypeRequest, ID: 7, Codec: wire.CodecJSON, Pattern: "cmd:sum,role:math", Meta: []wire.Meta{{Key: ":c", Value: "node"}}, Payload: []byte(`{"a":1}`)}
	one := encodeFrame(&req)
	f.Add(one)
	f.Add(append(append([]byte(nil), one...), encodeFrame(&wire.Frame{Type: wire.TypeCancel, ID: 7})...))
	f.Add(append(append([]byte(nil), one...), 0, 0, 0, 1))
	f.Add(append(append([]byte(nil), one...), one[:len(one)-1]...))
	f.Add([]byte{})
	const max = 1 << 10
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := checkBatch(data, max); err != nil {
			return
		}
		var again []byte
		n := 0
		for rest := data; len(rest) > 0; n++ {
			var fr wire.Frame
			var err error
			if rest, err = nextFrame(rest, max, &fr); err != nil {
				if n == 0 {
					return // a message of one frame is checked as it is decoded
				}
				t.Fatalf("frame %d of an accepted batch: %v", n, err)
			}
			if size := fr.Size() - 4; size > max {
				t.Fatalf("accepted a frame of %d bytes over the limit %d", size, max)
			}
			again = wire.AppendFrame(again, &fr)
		}
		if n == 0 || n > maxBatchFrames {
			t.Fatalf("accepted %d frames", n)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("decoded frames that encode to %x, not %x", again, data)
		}
	})
}

// FuzzStreamMessage feeds arbitrary data, as messages on a stream's
// subject, to a caller's stream (the node's frames: header, data,
// credit, end, and pings): it never panics, and the stream never holds
// more than the credit it granted plus one message, whatever the frames'
// numbers and sizes. The stream starts with a small grant (fuzzWindow),
// so that small inputs go past it.
func FuzzStreamMessage(f *testing.F) {
	var data []byte
	for _, fr := range []wire.Frame{
		{Type: wire.TypeStreamHeader, ID: 1, Meta: []wire.Meta{{Key: "h", Value: "1"}}},
		{Type: wire.TypeStreamData, ID: 2, Payload: make([]byte, 3<<10)},
		{Type: wire.TypeStreamData, ID: 3, Payload: make([]byte, 2<<10)},
		{Type: wire.TypeStreamCredit, ID: 4, Payload: wire.AppendCredit(nil, 7)},
		{Type: wire.TypeStreamEnd, ID: 5, Meta: []wire.Meta{{Key: "t", Value: "2"}}, Payload: wire.AppendError(nil, 0, "")},
	} {
		one := encodeFrame(&fr)
		f.Add(one, uint8(1))
		data = append(data, one...)
	}
	f.Add(data, uint8(2))
	f.Add(encodeFrame(&wire.Frame{Type: wire.TypePing}), uint8(1))
	f.Add(encodeFrame(&wire.Frame{Type: wire.TypeStreamCredit, ID: 1, Payload: []byte{0}}), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, times uint8) {
		b := &broker{t: &Transport{log: slog.New(slog.DiscardHandler)}, pending: map[uint64]*pending{}, streams: map[uint64]*clientStream{}, conns: map[*Conn]struct{}{}}
		b.max.Store(1 << 20)
		c := &Conn{b: b, subject: "wizard.node.x", where: "wizard: nats: wizard.node.x", done: make(chan struct{})}
		cs := &clientStream{c: c, id: 1, hdr: make(chan struct{})}
		cs.st.init(nil, c.subject, "_INBOX.x.1", c.where, b.maxFrame, wire.InitialWindow, true, &c.grown)
		const fuzzWindow = 4 << 10
		cs.st.flow.Init(fuzzWindow, false, nil) // a small grant, which data beyond exceeds
		b.streams[1] = cs
		c.inflight, c.nstreams = 1, 1
		largest := 0
		for rest := data; len(rest) > 0; {
			var fr wire.Frame
			var err error
			if rest, err = nextFrame(rest, 1<<20, &fr); err != nil {
				break
			}
			largest = max(largest, len(fr.Payload))
		}
		for range times % 4 {
			b.onStream(cs, &natsgo.Msg{Subject: "_INBOX.x.1", Reply: "_INBOX.y.1", Data: data})
			if q := cs.Queued(); q > fuzzWindow+largest {
				t.Fatalf("the stream holds %d bytes, over its grant plus its largest message (%d)", q, fuzzWindow+largest)
			}
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		for {
			if _, _, err := cs.Recv(ctx); err != nil {
				break
			}
		}
	})
}
