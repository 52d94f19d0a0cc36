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
