package mux

import "time"

// Workers serve requests one after another, so that a stack grown by one
// request serves the next ones too (a fresh goroutine per request spent
// most of the server's CPU growing stacks). Idle workers wait on a stack,
// guarded by c.mu: the one that finished last takes the next request (its
// stack is the warmest), and handing it over is one receive on its own
// channel — no select over shared channels, no timer per request. A
// worker idle for a whole workerIdle period leaves at the next reap; all
// leave when Serve returns. A connection on which nothing ran for a whole
// workerQuiet period keeps no worker at all (see quiet.go). At most MaxInFlight run at once: requests
// beyond wait in the server's pending queue, and the worker that
// finishes takes the first.

// worker is one serving goroutine's handle.
type worker struct {
	next chan *request // capacity 1, so handing over never waits; nil: leave
	gen  uint64        // s.gen when it went idle
}

// workerIdle is how long, at least, an idle worker waits for another
// request (at most twice as long).
const workerIdle = time.Second

// takeWorker pops the idle worker that finished last, or returns nil.
// Callers hold c.mu.
func (s *server) takeWorker() *worker {
	s.quiet.starts++
	n := len(s.idleWorkers)
	if n == 0 {
		return nil
	}
	w := s.idleWorkers[n-1]
	s.idleWorkers[n-1] = nil
	s.idleWorkers = s.idleWorkers[:n-1]
	return w
}

// start serves r on w, or on a new worker when w is nil.
func (s *server) start(r *request, w *worker) {
	if w != nil {
		w.next <- r
		return
	}
	go s.work(r)
}

// work serves r, then the requests waiting for a handler and those
// handed to it, until it is told to leave.
func (s *server) work(r *request) {
	w := &worker{next: make(chan *request, 1)}
	for r != nil {
		if r = r.serve(w); r == nil { // w was parked
			r = <-w.next
		}
	}
}

// parkWorker puts w on the idle stack. Callers hold c.mu. Serve sends the
// idle workers away only after every handler has returned, so every
// worker is parked by then.
func (s *server) parkWorker(w *worker) {
	w.gen = s.gen
	s.idleWorkers = append(s.idleWorkers, w)
	if !s.reaping {
		s.reaping = true
		if s.reaper == nil {
			s.reaper = time.AfterFunc(workerIdle, s.reap)
		} else {
			s.reaper.Reset(workerIdle)
		}
	}
	if s.running == 0 && len(s.pending) == 0 {
		s.armQuiet()
	}
}

// reap sends away the workers idle since before the last reap (they sit
// at the bottom of the stack) and re-arms while workers remain idle.
func (s *server) reap() {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.stopped {
		return
	}
	i := 0
	for i < len(s.idleWorkers) && s.idleWorkers[i].gen < s.gen {
		s.idleWorkers[i].next <- nil
		i++
	}
	s.idleWorkers = append(s.idleWorkers[:0], s.idleWorkers[i:]...)
	clear(s.idleWorkers[len(s.idleWorkers):cap(s.idleWorkers)])
	s.gen++
	if s.reaping = len(s.idleWorkers) > 0; s.reaping {
		s.reaper.Reset(workerIdle)
	}
}

// stopWorkers sends every worker away (all are idle: Serve calls it once
// no handler runs) and stops the reaper.
func (s *server) stopWorkers() {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	s.stopped = true
	for _, w := range s.idleWorkers {
		w.next <- nil
	}
	s.idleWorkers = nil
	if s.reaper != nil {
		s.reaper.Stop()
	}
	if s.quiet.t != nil {
		s.quiet.t.Stop()
	}
}
