package mux

import "sync"

// maxPooledBuffer is the largest buffer put back in the pool, so that one
// big frame does not pin its memory for ever.
const maxPooledBuffer = 64 << 10

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
