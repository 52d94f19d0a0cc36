package mux

import "fmt"

// Writing past the writer. An answer to a lone request served inline
// (see inline.go) would wake the writer goroutine only for it to write one
// frame: when the writer is idle (its queue empty, all it took flushed)
// and the reader has nothing more to read, the reader writes the answer
// to the stream itself, as one write. Frames pushed meanwhile wait in the
// queue without waking the writer, and writeDirect wakes it once it is
// done, so that frames keep their order and only one goroutine writes at
// a time. When more requests are buffered, answers go through the writer,
// which coalesces them.

// directLocked reports whether the answer of a request the reader served
// inline, keeping its role, is written past the writer, and if so claims
// the stream for it; c.mu is held.
func (s *server) directLocked() bool {
	c := s.c
	if s.more {
		return false
	}
	if !c.wIdle || c.direct || len(c.q) > 0 || c.wclosed || c.quit {
		return false
	}
	c.direct = true
	return true
}

// writeDirect writes buf, claimed by directLocked, to the stream, then
// gives the stream back to the writer. A failed write ends the
// connection, as the writer's would.
func (c *conn) writeDirect(buf *[]byte) {
	_, err := c.cw.Write(*buf)
	putBuffer(buf)
	c.mu.Lock()
	c.direct = false
	if len(c.q) > 0 || c.quit || c.wclosed { // wclosed: stopWriter waits for this write
		c.wakeWriter()
	}
	c.mu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("wizard: mux: writing: %w", err))
	}
}
