package nats

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// A NATS message's data is one wizard frame as runtime/internal/wire
// encodes it, length field first: the type, flags, codec, remaining
// deadline, pattern and metadata travel in its header and the payload
// after it; or several frames, a batch (see batch.go). The request id is
// 0 in a call of the single-frame form (named by its reply subject, one
// per call) and the call's id in a batch.

// errLength is the reason of a message whose length field does not
// match the data that follows it.
var errLength = errors.New("wizard: nats: the frame's length field does not match the message")

// decodeFrame decodes data, one NATS message's data, into f. It checks
// the size against max before anything else, allocates nothing but f's
// metadata slice (at most [wire.MaxMeta] pairs), and aliases data in f's
// strings and payload.
func decodeFrame(data []byte, max int, f *wire.Frame) error {
	if len(data)-4 > max {
		return fmt.Errorf("%w: %d bytes, limit %d", wire.ErrFrameTooLarge, len(data)-4, max)
	}
	if len(data) < 4 || uint64(binary.BigEndian.Uint32(data)) != uint64(len(data)-4) {
		return errLength
	}
	return wire.DecodeFrame(data[4:], f)
}

// encodeFrame returns f encoded as a message's data.
func encodeFrame(f *wire.Frame) []byte {
	return wire.AppendFrame(make([]byte, 0, f.Size()), f)
}

// frameBuf is a frame encoded as a message's data, in a pooled buffer:
// nats.go copies a message's data as it publishes it, so the buffer is
// free again once Publish returns.
type frameBuf struct{ b []byte }

var frameBufs sync.Pool

// maxPooledFrame bounds the buffers kept for reuse.
const maxPooledFrame = 64 << 10

// encodePooled encodes f into a pooled buffer; free returns it.
func encodePooled(f *wire.Frame) *frameBuf {
	fb, _ := frameBufs.Get().(*frameBuf)
	if fb == nil {
		fb = new(frameBuf)
	}
	fb.b = wire.AppendFrame(fb.b[:0], f)
	return fb
}

// free returns fb to the pool; fb must not be used after.
func (fb *frameBuf) free() {
	if cap(fb.b) <= maxPooledFrame {
		frameBufs.Put(fb)
	}
}
