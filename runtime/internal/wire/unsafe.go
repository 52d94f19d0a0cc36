package wire

import (
	"strings"
	"unsafe"
)

// The package's uses of unsafe, each with the invariant that makes it
// safe. The package pools nothing.

// noZeroMin is the body size from which [makeBody] leaves the new buffer
// unzeroed: below it, clearing costs less than the way around it.
const noZeroMin = 4 << 10

// makeBody returns a buffer for a frame body of n bytes. A large one is
// not zeroed, which spares clearing memory about to be overwritten:
// ReadFrame overwrites every byte of it before anyone reads it, and
// returns it empty when the read fails. strings.Builder's Grow is the
// standard library's way to such memory; the buffer is taken from the
// builder's one-byte string, which nothing uses as a string.
func makeBody(n int) []byte {
	if n < noZeroMin {
		return make([]byte, n)
	}
	var sb strings.Builder
	sb.Grow(n)
	sb.WriteByte(0)
	return unsafe.Slice(unsafe.StringData(sb.String()), n)
}

// aliasString returns b's bytes as a string without copying them. b is
// a frame body's: nothing writes it while the frame decoded from it is in
// use (see the package doc).
func aliasString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}
