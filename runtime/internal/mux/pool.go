package mux

import (
	"math/bits"
	"sync"
	"unsafe"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// The package's pools and its uses of unsafe, each with the invariant
// that makes it safe: the frames' encoding buffers (by size class above
// maxPooledBuffer), the connections' stream buffers, the clients' call
// records, and answers' strings moved into their callers' rooms.

// maxPooledBuffer is the largest buffer put back in the pool, so that one
// big frame does not pin its memory for ever.
const maxPooledBuffer = 64 << 10

// bufferPool holds the encoding buffers up to maxPooledBuffer: a buffer
// is put back once its frames are written, and nothing reads it after.
var bufferPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 512)
	return &b
}}

// getBuffer returns an empty encoding buffer with room for size bytes.
func getBuffer(size int) *[]byte {
	if p, ok := getBigBuffer(size); ok {
		return p
	}
	p := bufferPool.Get().(*[]byte)
	if cap(*p) < size {
		*p = make([]byte, 0, size)
	}
	return p
}

// putBuffer returns a buffer to the pool.
func putBuffer(p *[]byte) {
	if cap(*p) > maxPooledBuffer {
		putBigBuffer(p)
		return
	}
	*p = (*p)[:0]
	bufferPool.Put(p)
}

// Frames above maxPooledBuffer take their encoding buffers from pools by
// size class, so that a connection carrying large payloads reuses them
// instead of allocating, zeroing (and faulting in) and collecting a
// buffer per frame. The classes step by an eighth of their power of two
// (72 KiB, 80 KiB, ... 128 KiB, 144 KiB, ...), so a buffer is at most an
// eighth larger than its frame, up to bigBufferMax; larger frames are not
// pooled. sync.Pool lets buffers nobody takes go at the next collections,
// so one burst of large frames does not pin its memory.
const (
	bigMinShift  = 16               // classes start above 1<<bigMinShift, maxPooledBuffer
	bigMaxShift  = 23               // and end at 1<<bigMaxShift
	bigBufferMin = 1 << bigMinShift // == maxPooledBuffer (TestBigClass checks)
	bigBufferMax = 1 << bigMaxShift
	bigSteps     = 8 // classes per power of two
)

var bigBuffers [(bigMaxShift - bigMinShift) * bigSteps]sync.Pool

// bigClass returns the index of the smallest class that holds n bytes
// (bigBufferMin < n <= bigBufferMax) and that class's capacity.
func bigClass(n int) (int, int) {
	k := bits.Len(uint(n-1)) - 1 // 1<<k < n <= 1<<(k+1)
	step := 1 << (k - 3)
	sub := (n - 1<<k + step - 1) / step // 1 to bigSteps
	return (k-bigMinShift)*bigSteps + sub - 1, 1<<k + sub*step
}

// getBigBuffer returns an empty buffer with room for size bytes from its
// class's pool, or false when size is outside the classes.
func getBigBuffer(size int) (*[]byte, bool) {
	if size <= bigBufferMin || size > bigBufferMax {
		return nil, false
	}
	i, c := bigClass(size)
	if p, ok := bigBuffers[i].Get().(*[]byte); ok {
		return p, true
	}
	b := make([]byte, 0, c)
	return &b, true
}

// putBigBuffer returns a buffer of a class's exact capacity to its pool;
// it reports false for any other buffer.
func putBigBuffer(p *[]byte) bool {
	n := cap(*p)
	if n <= bigBufferMin || n > bigBufferMax {
		return false
	}
	i, c := bigClass(n)
	if c != n {
		return false
	}
	*p = (*p)[:0]
	bigBuffers[i].Put(p)
	return true
}

// streamBuffers holds the buffers of bufferSize bytes the connections
// borrow: a reader or writer gives one back when no byte is left in it,
// and keeps no slice of it (see streambuffer.go).
var streamBuffers = sync.Pool{New: func() any {
	b := make([]byte, bufferSize)
	return &b
}}

// getCall returns a call record of cl's: its channel is empty.
func (cl *Client) getCall() *call {
	if p, ok := cl.calls.Get().(*call); ok {
		return p
	}
	return &call{ch: make(chan struct{}, 1)}
}

// putCall returns p to cl's pool once its caller has taken its answer
// (or made sure none comes) and reads nothing of it any more.
func (cl *Client) putCall(p *call) {
	p.resp, p.err, p.meta, p.room, p.idem = wire.Frame{}, nil, nil, nil, false
	cl.calls.Put(p)
}

// rebase returns the string of kept, a copy of body, at s's place in
// body; s itself when it is not in body. kept is the caller's, written
// once here and not again while the answer is in use (see DoRoom), so a
// string into it stays as it is.
func rebase(s string, body, kept []byte) string {
	if len(s) == 0 {
		return ""
	}
	off := uintptr(unsafe.Pointer(unsafe.StringData(s))) - uintptr(unsafe.Pointer(unsafe.SliceData(body)))
	if off >= uintptr(len(body)) || off+uintptr(len(s)) > uintptr(len(body)) {
		return s
	}
	return unsafe.String(&kept[off], len(s))
}

// rebaseBytes is [rebase] for a non-empty payload.
func rebaseBytes(b, body, kept []byte) []byte {
	return unsafe.Slice(unsafe.StringData(rebase(unsafe.String(&b[0], len(b)), body, kept)), len(b))
}

// sameArray reports whether a and b start at the same address: whether
// a frame's body was read into the reader's scratch buffer. Nothing is
// read or written through the pointers.
func sameArray(a, b []byte) bool { return unsafe.SliceData(a) == unsafe.SliceData(b) }

// requestSize is what the server keeps for a request besides its frame:
// the request, with room for a small frame in it (see requestCost).
const requestSize = int(unsafe.Sizeof(request{}) + unsafe.Sizeof(requestBuf{}))

// inArray reports whether b starts inside arr's array (up to its
// capacity): a payload decoded from a buffer the reader reuses.
func inArray(b, arr []byte) bool {
	if len(b) == 0 || cap(arr) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	start := uintptr(unsafe.Pointer(unsafe.SliceData(arr)))
	return p >= start && p < start+uintptr(cap(arr))
}
