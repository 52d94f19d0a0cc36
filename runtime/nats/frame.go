package nats

import (
	"encoding/binary"
	"errors"
	"fmt"

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
