package mux

import (
	"math/bits"
	"sync"
)

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
