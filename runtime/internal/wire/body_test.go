package wire

import (
	"bytes"
	"testing"
)

// bytesBody is a Body of fixed bytes.
type bytesBody []byte

func (b bytesBody) Len() int                   { return len(b) }
func (b bytesBody) AppendTo(dst []byte) []byte { return append(dst, b...) }

// TestAppendFrameBody: a frame whose payload is a Body encodes as the
// same frame with the bytes in Payload, into a buffer sized by Size
// without growing it, and decodes back to that payload.
func TestAppendFrameBody(t *testing.T) {
	payload := bytes.Repeat([]byte("p"), 70<<10)
	plain := Frame{Type: TypeResponse, Codec: CodecProto, ID: 7, Meta: []Meta{{":t", "x.Y"}}, Payload: payload}
	body := plain
	body.Payload, body.Body = nil, bytesBody(payload)
	if plain.Size() != body.Size() {
		t.Fatalf("Size %d with a Body, want %d", body.Size(), plain.Size())
	}
	want := AppendFrame(nil, &plain)
	buf := make([]byte, 0, body.Size())
	got := AppendFrame(buf, &body)
	if !bytes.Equal(got, want) {
		t.Fatal("a frame with a Body encodes otherwise than with the same Payload")
	}
	if &got[0] != &buf[:1][0] {
		t.Error("AppendFrame grew a buffer of Size bytes")
	}
	var f Frame
	if err := DecodeFrame(got[4:], &f); err != nil || !bytes.Equal(f.Payload, payload) || f.Body != nil {
		t.Errorf("decoded %v (body %v), err %v", len(f.Payload), f.Body, err)
	}
}
