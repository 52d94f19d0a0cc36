package wire

import "math/bits"

// uvarintLen returns the number of bytes binary.AppendUvarint writes for x.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// uvarint decodes a canonical (shortest-form) uvarint from the front of b.
// It returns the value and the number of bytes read; n <= 0 means b holds
// no complete, canonical, in-range varint.
func uvarint(b []byte) (v uint64, n int) {
	if len(b) > 0 && b[0] < 0x80 { // the common one-byte case
		return uint64(b[0]), 1
	}
	var s uint
	for i, c := range b {
		if i == 10 {
			return 0, -1 // overflow
		}
		if c < 0x80 {
			if i == 9 && c > 1 {
				return 0, -1 // overflow
			}
			if c == 0 {
				return 0, -1 // padded: a shorter form exists
			}
			return v | uint64(c)<<s, i + 1
		}
		v |= uint64(c&0x7f) << s
		s += 7
	}
	return 0, 0 // truncated
}
