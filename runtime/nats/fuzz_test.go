package nats

import (
	"bytes"
	"testing"

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
