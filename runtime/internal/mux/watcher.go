package mux

import (
	"slices"
	"sync"
	"time"
)

// Watcher is the watch over requests served inline (see inline.go), one
// for any number of connections: a timer that fires every handOverAfter
// while some connection registered with it serves inline, and scans those
// connections only. A connection registers when it serves a request
// inline and is not registered yet, and is dropped by a tick that finds
// it served none for a whole period, or when it ends; the timer stops at
// a tick that leaves no connection registered, and the next registration
// starts it again. So what the watch costs grows with the requests served
// inline, not with the connections times the ticks: a timer of each
// connection's firing every handOverAfter costs a goroutine per fire (a
// timer's func runs on one) and a timer per connection in the runtime's
// heaps.
//
// The owner of the connections makes it ([Options.Watch]), a listener
// for the connections it accepts. Its timer belongs to the
// testing/synctest bubble of the connection that first started it: the
// connections of one Watcher must all be in the same bubble, or none.
type Watcher struct {
	mu      sync.Mutex
	servers []*server   // registered: s.watching is set
	spare   []*server   // the tick's, for registrations while it scans
	ticking bool        // the timer is armed, or its tick runs
	t       *time.Timer // runs tick
}

// NewWatcher returns a Watcher for the connections given it in
// [Options.Watch].
func NewWatcher() *Watcher { return &Watcher{} }

// add registers s, whose c.mu is held (see inlineLocked), and arms the
// timer if it is not.
func (w *Watcher) add(s *server) {
	w.mu.Lock()
	w.servers = append(w.servers, s)
	if !w.ticking {
		w.ticking = true
		if w.t == nil {
			w.t = time.AfterFunc(handOverAfter, w.tick)
		} else {
			w.t.Reset(handOverAfter)
		}
	}
	w.mu.Unlock()
}

// remove drops s, whose connection has ended and serves no request any
// more (Serve's finish), so that the Watcher keeps nothing of it.
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
	// A tick scanning s drops it itself.
	if i := slices.Index(w.servers, s); i >= 0 {
		w.servers = slices.Delete(w.servers, i, i+1)
	}
	if len(w.servers) == 0 && w.ticking && w.t.Stop() {
		w.ticking = false // no tick runs: it would have found none
	}
	w.mu.Unlock()
}

// tick is the timer's: it takes the registered connections (those that
// register during its scan go to a list of their own), ticks each, puts
// back those it keeps and arms the timer again while any is registered.
// A connection is in one of the two lists exactly while its watching is
// set, so that it is never registered twice.
func (w *Watcher) tick() {
	w.mu.Lock()
	scan := w.servers
	w.servers = w.spare[:0]
	w.mu.Unlock()

	kept := scan[:0]
	var handed *server // the last connection handed over, read on this goroutine
	for _, s := range scan {
		switch s.tick() {
		case watchKeep:
			kept = append(kept, s)
		case watchHandOver:
			if handed != nil {
				go handed.read()
			}
			handed = s
		}
	}
	clear(scan[len(kept):]) // no stale pointer keeps a connection

	w.mu.Lock()
	added := w.servers
	w.servers = append(kept, added...)
	clear(added)
	w.spare = added[:0]
	if w.ticking = len(w.servers) > 0; w.ticking {
		w.t.Reset(handOverAfter)
	}
	w.mu.Unlock()
	if handed != nil {
		handed.read() // the reader role, on the timer's goroutine
	}
}

// What a tick does with a connection.
const (
	watchDrop     = iota // nothing served inline for a period, or ended: dropped
	watchKeep            // kept registered
	watchHandOver        // its reader role goes to a new goroutine, and it is dropped
)

// tick is the watch's tick for s: s stays registered while a request
// runs inline, or ran inline since the last tick. A request served inline
// that is the one the last tick saw has run for between handOverAfter and
// twice that: the reader role goes to a new goroutine (the caller runs
// s.read on one), and s is dropped.
func (s *server) tick() int {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !s.watching: // removed: its connection ended
		return watchDrop
	case s.inlineReq == nil && s.inlineSeq == s.watched:
		s.watching = false // none for a whole period: the next one registers again
		return watchDrop
	case s.inlineReq == nil || s.inlineSeq != s.watched:
		s.watched = s.inlineSeq
		return watchKeep
	}
	s.watching = false
	s.inlineReq = nil
	s.flushLocked() // the answers of the batch so far leave now
	s.readerW = nil // the handler's goroutine keeps its handle as a worker
	s.backoff = min(max(2*s.backoff, inlineBackoff), maxInlineBackoff)
	s.skip = s.backoff
	return watchHandOver
}
