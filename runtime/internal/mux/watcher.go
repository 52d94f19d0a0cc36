package mux

import (
	"slices"
	"sync"
	"time"
)

// Watcher is the watch over requests served inline (see inline.go), one
// for any number of connections: a goroutine that ticks every
// handOverAfter while some connection registered with it serves inline,
// and scans those connections only. A connection registers when it
// serves a request inline and is not registered yet, and is dropped at a
// tick that finds it served none for a whole period; the goroutine ends
// at a tick that leaves no connection registered, and the next
// registration starts another. So a Watcher needs no closing, and what it
// costs grows with the requests served inline, not with the connections
// times the ticks: a timer of each connection's that fires every
// handOverAfter costs a goroutine per fire and a timer per connection in
// the runtime's heaps.
//
// The owner of the connections makes it ([Options.Watch]), a listener
// for the connections it accepts. Its goroutine and its ticker belong to
// the testing/synctest bubble of the connection that started them: the
// connections of one Watcher must all be in the same bubble, or none.
type Watcher struct {
	mu      sync.Mutex
	servers []*server     // registered: s.watching is set
	spare   []*server     // the tick's, for registrations while it scans
	ticking bool          // the goroutine runs
	stop    chan struct{} // tells the goroutine that the last connection left (cap 1)
}

// NewWatcher returns a Watcher for the connections given it in
// [Options.Watch].
func NewWatcher() *Watcher { return &Watcher{stop: make(chan struct{}, 1)} }

// add registers s, whose c.mu is held (see inlineLocked), and starts the
// goroutine if it does not run.
func (w *Watcher) add(s *server) {
	w.mu.Lock()
	w.servers = append(w.servers, s)
	start := !w.ticking
	w.ticking = true
	w.mu.Unlock()
	if start {
		go w.run()
	}
}

// remove drops s, whose connection has ended and serves no request any
// more (Serve's finish), so that a Watcher's goroutine does not outlive
// its connections: it ends at once when s was the last one.
func (w *Watcher) remove(s *server) {
	c := s.c
	c.mu.Lock()
	watching := s.watching
	s.watching = false
	c.mu.Unlock()
	if !watching {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// A tick scanning s drops it itself.
	if i := slices.Index(w.servers, s); i >= 0 {
		w.servers = slices.Delete(w.servers, i, i+1)
	}
	if len(w.servers) == 0 && w.ticking {
		select {
		case w.stop <- struct{}{}:
		default:
		}
	}
}

// run ticks every handOverAfter until a tick leaves no connection
// registered. A tick takes the registered connections, and registrations
// during its scan go to a list of their own; it then puts back those it
// keeps. A connection is in one of the two lists exactly while its
// watching is set, so that it is never registered twice.
func (w *Watcher) run() {
	t := time.NewTicker(handOverAfter)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-w.stop:
			w.mu.Lock()
			if len(w.servers) == 0 {
				w.ticking = false
				w.mu.Unlock()
				return
			}
			w.mu.Unlock()
			continue
		}
		w.mu.Lock()
		scan := w.servers
		w.servers = w.spare[:0]
		w.mu.Unlock()

		kept := scan[:0]
		for _, s := range scan {
			if s.tick() {
				kept = append(kept, s)
			}
		}
		clear(scan[len(kept):]) // no stale pointer keeps a connection

		w.mu.Lock()
		added := w.servers
		w.servers = append(kept, added...)
		clear(added)
		w.spare = added[:0]
		if len(w.servers) == 0 {
			w.ticking = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
	}
}

// tick is the watch's tick for s. It reports whether s stays registered:
// while a request runs inline, or ran inline since the last tick. A
// request served inline that is the one the last tick saw has run for
// between handOverAfter and twice that: the reader role goes to a new
// goroutine, and s is dropped.
func (s *server) tick() bool {
	c := s.c
	c.mu.Lock()
	if !s.watching { // removed: its connection ended
		c.mu.Unlock()
		return false
	}
	if s.inlineReq == nil && s.inlineSeq == s.watched {
		s.watching = false // none for a whole period: the next one registers again
		c.mu.Unlock()
		return false
	}
	if s.inlineReq == nil || s.inlineSeq != s.watched {
		s.watched = s.inlineSeq
		c.mu.Unlock()
		return true
	}
	s.watching = false
	s.inlineReq = nil
	s.flushLocked() // the answers of the batch so far leave now
	s.readerW = nil // the handler's goroutine keeps its handle as a worker
	s.backoff = min(max(2*s.backoff, inlineBackoff), maxInlineBackoff)
	s.skip = s.backoff
	c.mu.Unlock()
	go s.read()
	return false
}
