package mux

import "fmt"

// Writing past the writer. An answer to a lone request served inline
// (see inline.go) would wake the writer goroutine only for it to write one
// frame: when the writer is idle (waiting for frames, all it took
// flushed) and the reader has nothing more to read, the reader writes the
// answer to the stream itself, as one write. So does it with the last answer of
// requests read together, which it served inline: the answers held for
// the batch (see holdLocked), and any frame queued behind them, leave
// with it in one write, rather than through a wake of the writer (a
// goroutine hand-off per batch, at 16 callers one in a dozen calls), as
// long as the read that brought the batch left room in the reader's
// buffer: the stream had no more, and the reader would wait on it next.
// After a read that filled the buffer, more is likely there, and the
// writer writes the batch while the reader reads on.
// Frames pushed meanwhile wait in the queue without waking the writer,
// and writeDirect wakes it once it is done, so that frames keep their
// order and only one goroutine writes at a time. While more requests are
// buffered, answers wait for the batch's end; a batch whose answers
// outgrow one buffer goes through the writer.

// directLocked reports whether the answer of a request the reader served
// inline, keeping its role, is written past the writer, and if so claims
// the stream for it and takes the queue, whose frames go first; c.mu is
// held.
func (s *server) directLocked() (bool, []outFrame) {
	c := s.c
	if s.more {
		return false, nil
	}
	if !c.wIdle || c.direct || c.wclosed || c.quit {
		return false, nil
	}
	var batch []outFrame
	if len(c.q) > 0 {
		if !c.br.drained {
			// The last read filled the buffer: more is likely waiting
			// in the stream, and the writer writes the batch while
			// the reader reads on.
			return false, nil
		}
		size := 0
		for _, f := range c.q {
			size += len(*f.buf)
		}
		if size > bufferSize {
			return false, nil
		}
		// The writer is idle: it took its last batch, and set spare,
		// before it went idle under c.mu, and takes no batch until
		// writeDirect gives the stream back.
		batch, c.q = c.q, c.spare[:0]
		c.spare = nil
		if c.space != nil {
			close(c.space)
			c.space = nil
		}
	}
	s.held, s.holding = 0, false
	c.direct = true
	return true, batch
}

// writeDirect writes the frames of batch, then buf, claimed by
// directLocked, to the stream in one write, then gives the stream back
// to the writer. A failed write ends the connection, as the writer's
// would.
func (c *conn) writeDirect(buf *[]byte, batch []outFrame) {
	p := *buf
	queued := 0 // bytes (buffer capacity) of batch's frames, counted in c.queued
	var ping uint64
	if len(batch) > 0 {
		p = c.sendBuf[:0]
		for i, f := range batch {
			p = append(p, *f.buf...)
			queued += cap(*f.buf)
			if f.ping != 0 {
				ping = f.ping
			}
			putBuffer(f.buf)
			batch[i] = outFrame{}
		}
		p = append(p, *buf...)
		c.sendBuf = p[:0]
	}
	_, err := c.cw.Write(p)
	putBuffer(buf)
	if err == nil && ping != 0 {
		c.pingSent.Store(ping)
	}
	c.mu.Lock()
	c.direct = false
	if batch != nil && c.spare == nil {
		c.spare = batch[:0]
	}
	if queued > 0 {
		// What the writer does once it has written a batch.
		c.addQueued(-queued)
		if !c.full() {
			if c.drained != nil {
				c.drained()
			}
			c.wakeLocked()
		}
	}
	if len(c.q) > 0 || c.quit || c.wclosed { // wclosed: stopWriter waits for this write
		c.wakeWriter()
	}
	c.mu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("wizard: mux: writing: %w", err))
	}
}
