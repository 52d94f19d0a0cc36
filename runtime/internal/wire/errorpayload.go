package wire

import (
	"encoding/binary"
	"math"
	"slices"
)

// AppendError appends the payload of a TypeError frame to dst: the code
// (gRPC's numbering) and the message, without details. A caller with
// details appends them afterwards: they are the rest of the payload.
func AppendError(dst []byte, code uint32, msg string) []byte {
	dst = slices.Grow(dst, uvarintLen(uint64(code))+uvarintLen(uint64(len(msg)))+len(msg))
	dst = binary.AppendUvarint(dst, uint64(code))
	dst = binary.AppendUvarint(dst, uint64(len(msg)))
	return append(dst, msg...)
}

// DecodeError decodes the payload of a TypeError frame, ignoring any
// details. msg aliases b.
func DecodeError(b []byte) (code uint32, msg string, err error) {
	code, msg, _, err = DecodeErrorDetails(b)
	return code, msg, err
}

// DecodeErrorDetails decodes the payload of a TypeError frame; details is
// the rest of the payload after the message (empty when there are none).
// msg and details alias b.
func DecodeErrorDetails(b []byte) (code uint32, msg string, details []byte, err error) {
	c, n := uvarint(b)
	if n <= 0 {
		return 0, "", nil, errCode
	}
	if c > math.MaxUint32 {
		return 0, "", nil, errCodeRange
	}
	b = b[n:]
	l, n := uvarint(b)
	if n <= 0 {
		return 0, "", nil, errMessageLen
	}
	b = b[n:]
	if l > uint64(len(b)) {
		return 0, "", nil, errMessageTrunc
	}
	return uint32(c), aliasString(b[:l]), b[l:], nil
}
