package mux

import (
	"fmt"
	"slices"
)

// Sending past the writer, the client's. A lone call whose request finds
// the writer goroutine idle (its queue empty, all it took flushed) writes
// the frame to the socket itself: waking the writer would cost a goroutine
// hand-off on every call a lone caller makes. A call is lone when it and
// the loneCalls calls before it found no other call waiting for an answer:
// where calls overlap, the writer does better, coalescing requests that
// come together into one write (callers writing their own whenever they
// found none waiting would leave the first of each round of calls alone
// in its write). The caller never waits on
// the socket, so that its context still bounds it: it writes what the
// kernel takes at once (see tryWriter), and when the kernel takes less the
// rest goes to the head of the queue, for the writer goroutine, which
// waits for room. Frames pushed meanwhile wait in the queue without waking
// the writer; the caller writes them too, in one write per batch, up to
// sendRounds batches, then gives the stream back and wakes the writer for
// what is left, so that frames keep their order and one goroutine writes
// at a time. Without a socket to write to so (TLS, a pipe) every frame
// goes through the writer.

// loneCalls is how many calls in a row must find no other call waiting
// before the next is written by its caller.
const loneCalls = 64

// sendRounds bounds the batches of others' frames a caller writes after
// its own before it hands the stream back to the writer goroutine.
const sendRounds = 2

// sendLocked reports whether the frame being queued is written past the
// writer by its caller, and if so claims the stream for it; c.mu is held
// and the writer has not stopped (see lockSpace).
func (c *conn) sendLocked() bool {
	if c.tw == nil || !c.wIdle || c.direct || len(c.q) > 0 || c.quit {
		return false
	}
	c.direct = true
	return true
}

// sendDirect writes f, claimed by sendLocked, and the frames queued behind
// it, then gives the stream back to the writer. A failed write ends the
// connection, as the writer's would.
func (c *conn) sendDirect(f outFrame) {
	batch := append(c.sendQ[:0], f)
	for round := 0; ; round++ {
		rest, err := c.writeNow(batch)
		clear(batch)
		if err != nil {
			c.fail(fmt.Errorf("wizard: mux: writing: %w", err)) // before giving the stream back: see stopWriter
		}
		c.mu.Lock()
		if err != nil || len(rest) > 0 || len(c.q) == 0 || round == sendRounds || c.quit || c.wclosed {
			if len(rest) > 0 {
				for _, r := range rest {
					c.queued += cap(*r.buf)
				}
				c.q = slices.Insert(c.q, 0, rest...)
			}
			c.sendQ = batch[:0]
			c.direct = false
			wake := len(c.q) > 0 || c.quit || c.wclosed
			c.mu.Unlock()
			if wake {
				c.wakeWriter()
			}
			return
		}
		batch, c.q = c.q, batch[:0]
		for _, r := range batch {
			c.queued -= cap(*r.buf)
		}
		if c.space != nil {
			close(c.space)
			c.space = nil
		}
		c.mu.Unlock()
	}
}

// writeNow writes the frames of batch, gathered into one write, as far as
// the socket takes them at once. It returns the frames it did not write
// (the first may be the rest of one it began), and the stream's error.
// [conn.written] counts every request of which a byte was written.
func (c *conn) writeNow(batch []outFrame) ([]outFrame, error) {
	p := *batch[0].buf
	k := 1 // frames gathered in p
	if len(batch) > 1 && len(p) < bufferSize {
		p = append(c.sendBuf[:0], p...)
		for ; k < len(batch) && len(p)+len(*batch[k].buf) <= bufferSize; k++ {
			p = append(p, *batch[k].buf...)
		}
		c.sendBuf = p[:0]
	}
	n, err := c.tw.write(p)
	c.cw.n += int64(n)
	c.buffered += int64(n) // the writer's offsets count these bytes too
	var rest []outFrame
	off := 0
	for i, f := range batch[:k] {
		size := len(*f.buf)
		switch {
		case off >= n: // not begun
			rest = append(rest, f)
		case off+size <= n: // written whole
			if f.id != 0 {
				c.written.Store(f.id)
			} else if f.ping != 0 {
				c.pingSent.Store(f.ping)
			}
			putBuffer(f.buf)
		default: // begun: the writer writes the rest
			if f.id != 0 {
				c.written.Store(f.id)
			}
			tail := getBuffer(off + size - n)
			*tail = append(*tail, (*f.buf)[n-off:]...)
			putBuffer(f.buf)
			rest = append(rest, outFrame{buf: tail, ping: f.ping})
		}
		off += size
		batch[i] = outFrame{}
	}
	rest = append(rest, batch[k:]...)
	if err != nil {
		for _, f := range rest {
			putBuffer(f.buf)
		}
		return nil, err
	}
	return rest, nil
}
