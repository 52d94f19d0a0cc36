package wire

import (
	"encoding/binary"
	"math"
)

// MaxCredit is the largest credit one stream-credit frame may grant.
const MaxCredit = math.MaxUint32

// AppendCredit appends the payload of a TypeStreamCredit frame to dst:
// n, the bytes of stream data granted, as a uvarint. n is in [1,
// [MaxCredit]].
func AppendCredit(dst []byte, n uint32) []byte {
	return binary.AppendUvarint(dst, uint64(n))
}

// DecodeCredit decodes the payload of a TypeStreamCredit frame: exactly
// one canonical uvarint in [1, [MaxCredit]], as HTTP/2 refuses a
// WINDOW_UPDATE of zero. Anything else is an error wrapping
// [ErrMalformed].
func DecodeCredit(b []byte) (uint32, error) {
	n, k := uvarint(b)
	switch {
	case k <= 0:
		return 0, errCredit
	case k != len(b):
		return 0, errCreditTrailing
	case n == 0 || n > MaxCredit:
		return 0, errCreditRange
	}
	return uint32(n), nil
}

// InitialWindow is the credit each side of a stream holds for its data
// when the stream opens, in bytes, before any stream-credit frame: the
// protocol's constant, not sent. A receiver that wants a larger window
// grants the difference with a stream-credit frame at once.
const InitialWindow = 256 << 10

// MessageCost is what each data frame costs in credit beyond its
// payload's bytes: a message of n bytes takes n + MessageCost of its
// sender's credit, and its receiver grants that much back. It stands for
// what a queued message costs besides its payload (its frame and its
// place in queues), so that a window bounds a stream of small messages
// to a few thousand of them, not to one per byte.
const MessageCost = 64
