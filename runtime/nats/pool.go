package nats

import (
	"sync"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// The package's pools. Who owns a message's memory, and when it may be
// reused, is runtime.Message's rule; the pools here hold only the
// transport's own buffers and records.

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

// pendings pools pending calls: a call takes one answer from its pending
// (or makes sure none comes) before it puts it back.
var pendings sync.Pool

// getPending returns a pending call on c.
func getPending(c *Conn) *pending {
	p, _ := pendings.Get().(*pending)
	if p == nil {
		p = &pending{ch: make(chan answer, 1)}
	}
	p.conn = c
	return p
}

// putPending returns p to the pool: its channel is empty, and no answer
// is on its way to it.
func putPending(p *pending) {
	p.conn = nil
	pendings.Put(p)
}

// batches pools the messages a batcher fills: a batch is put back once
// published, when nothing reads its data any more (nats.go copies a
// message's data as it publishes it).
var batches = sync.Pool{New: func() any { return new(batch) }}

// getBatch returns an empty batch.
func getBatch() *batch { return batches.Get().(*batch) }

// putBatch empties b and returns it to the pool, unless its buffer grew
// past maxPooledFrame; b must not be used after.
func putBatch(b *batch) {
	b.data, b.ids, b.frames = b.data[:0], b.ids[:0], 0
	if cap(b.data) <= maxPooledFrame {
		batches.Put(b)
	}
}
