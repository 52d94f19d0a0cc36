package bridge

import "google.golang.org/protobuf/proto"

// protoBody is a frame's payload still to marshal: m, of n bytes as
// proto.Size gave them (its sizes cached in the message). The mux
// marshals it straight into the frame's buffer.
type protoBody struct {
	m proto.Message
	n int
}

// Len returns the payload's size.
func (b *protoBody) Len() int { return b.n }

// AppendTo marshals the message onto dst. The node leaves only messages
// whose encoding cannot fail, and the frame's length field is already
// written: should the message have changed since its size was taken (a
// handler racing with its own result), the payload is cut or padded with
// zeros to its size, so that the stream stays whole (the caller then fails
// to decode the answer).
func (b *protoBody) AppendTo(dst []byte) []byte {
	n := len(dst)
	out, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(dst, b.m)
	if err != nil {
		out = dst
	}
	switch got := len(out) - n; {
	case got > b.n:
		out = out[:n+b.n]
	case got < b.n:
		out = append(out, make([]byte, b.n-got)...)
	}
	return out
}
