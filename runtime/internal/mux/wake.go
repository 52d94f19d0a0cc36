package mux

// pushUnlock queues f, as pushLocked does, and unlocks c.mu before it
// wakes the writer: waking a parked goroutine may wake a thread for it,
// and callers queueing their requests should not wait on c.mu meanwhile.
// c.mu is held and the writer has not stopped (see lockSpace).
func (c *conn) pushUnlock(f outFrame) {
	wake := len(c.q) == 0 && !c.direct // else the writer is awake, or writeDirect wakes it
	c.q = append(c.q, f)
	c.queued += cap(*f.buf)
	c.mu.Unlock()
	if wake {
		c.wakeWriter()
	}
}

// wakeWriter wakes the writer if it waits for frames, without blocking:
// a wake already pending is enough.
func (c *conn) wakeWriter() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}
