package bridge

import (
	"context"

	"github.com/wizardmesh/wizard/runtime"
	"google.golang.org/protobuf/proto"
)

// bodyServer is a runtime.Server that leaves a protobuf result for the
// transport to encode (a node's: see the runtime's ServeMessageBody), so
// that the answer's frame carries it as a [protoBody]. free reports that
// nothing holds m, or what it points to, once the reply is encoded: the
// transport may then reuse their memory.
type bodyServer interface {
	ServeMessageBody(ctx context.Context, m *runtime.Message) (reply *runtime.Message, body proto.Message, size int, free bool)
}

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
