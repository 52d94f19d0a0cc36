package mux

import "time"

// workerQuiet is how long, at least, a connection on which no request
// started keeps its idle workers (at most twice as long). An idle
// connection then costs no worker goroutine; its next request starts one.
const workerQuiet = 250 * time.Millisecond

// quiet is the state of the timer that sends away the workers of a
// connection gone quiet; guarded by c.mu.
type quiet struct {
	t      *time.Timer // runs server.reapQuiet
	armed  bool
	starts uint64 // requests given to a worker (or to a new one) so far
	mark   uint64 // starts when t was armed
}

// armQuiet arms the quiet timer, unless it is armed; c.mu is held and no
// request runs or waits.
func (s *server) armQuiet() {
	q := &s.quiet
	if q.armed {
		return
	}
	q.armed, q.mark = true, q.starts
	if q.t == nil {
		q.t = time.AfterFunc(workerQuiet, s.reapQuiet)
	} else {
		q.t.Reset(workerQuiet)
	}
}

// reapQuiet sends every idle worker away when no request started since
// the timer was armed and none runs or waits now. When requests started
// meanwhile and the connection is quiet again, it waits another period;
// when requests run, the next worker to park on a quiet connection arms
// it again.
func (s *server) reapQuiet() {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	q := &s.quiet
	if s.stopped {
		return
	}
	if len(s.idleWorkers) == 0 || s.running > 0 || len(s.pending) > 0 {
		q.armed = false
		return
	}
	if q.starts != q.mark {
		q.mark = q.starts
		q.t.Reset(workerQuiet)
		return
	}
	q.armed = false
	for _, w := range s.idleWorkers {
		w.next <- nil
	}
	clear(s.idleWorkers)
	s.idleWorkers = s.idleWorkers[:0]
}
