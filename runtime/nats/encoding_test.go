package nats

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strconv"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// BenchmarkEncoding measures the two ways a call could travel: a wire
// frame as the message's data (the transport's), or NATS headers for the
// small fields and the payload as the data, as nats.go encodes and
// decodes headers. Metadata values may be binary (the call id is 8 raw
// bytes), which headers cannot carry: they go base64-encoded there.
func BenchmarkEncoding(b *testing.B) {
	f := wire.Frame{Type: wire.TypeRequest, Flags: wire.FlagIdempotent, Codec: wire.CodecProto, Deadline: 5 * time.Second,
		Pattern: "cmd:sum,role:math",
		Meta:    []wire.Meta{{Key: ":c", Value: "0123456789abcdef"}, {Key: ":i", Value: "\x00\x00\x00\x00\x00\x00\x00\x2a"}, {Key: ":k", Value: "fedcba9876543210"}, {Key: ":t", Value: "wizard.test.SumRequest"}},
		Payload: []byte{0x0a, 0x10, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0x40}}
	b.Run("frame", func(b *testing.B) {
		b.ReportAllocs()
		var out wire.Frame
		for b.Loop() {
			data := encodeFrame(&f)
			if err := decodeFrame(data, 1<<20, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("headers", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		for b.Loop() {
			h := http.Header{}
			h.Set("W-Type", strconv.Itoa(int(f.Type)))
			h.Set("W-Flags", strconv.Itoa(int(f.Flags)))
			h.Set("W-Codec", strconv.Itoa(int(f.Codec)))
			h.Set("W-Deadline", strconv.FormatInt(int64(f.Deadline/time.Microsecond), 10))
			h.Set("W-Pattern", f.Pattern)
			for _, m := range f.Meta {
				h.Add("W-Meta", base64.RawStdEncoding.EncodeToString([]byte(m.Key))+"="+base64.RawStdEncoding.EncodeToString([]byte(m.Value)))
			}
			buf.Reset()
			buf.WriteString("NATS/1.0\r\n")
			if err := h.Write(&buf); err != nil {
				b.Fatal(err)
			}
			buf.WriteString("\r\n")
			got, err := natsgo.DecodeHeadersMsg(buf.Bytes())
			if err != nil {
				b.Fatal(err)
			}
			for _, v := range got.Values("W-Meta") {
				if _, err := base64.RawStdEncoding.DecodeString(v[:bytes.IndexByte([]byte(v), '=')]); err != nil {
					b.Fatal(err)
				}
			}
			_ = f.Payload
		}
	})
}
