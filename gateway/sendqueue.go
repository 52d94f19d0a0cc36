package gateway

import "sync"

// sendQueue is a connection's bounded queue of frames to send, grown as
// frames wait and given back when it empties: a thousand idle
// connections hold no room for frames (a channel of the bound reserved
// 256 slots, 16 KiB, for each).
//
// It has no goroutine of its own: the push that finds no writer at work
// is told to become the writer (or start one), and the writer's pop that
// finds the queue empty ends its turn, both under the queue's lock, so
// that exactly one writer drains the queue at a time and no frame waits
// without one. A thousand idle connections hold no writer goroutine
// (and its stack) either.
//
// Events wait apart, in a queue of their own with its own bound
// (websocket.event_queue): a full one drops its oldest event or refuses
// the new one (the connection is then closed), while replies and stream
// frames never make room for events. The writer sends replies first.
type sendQueue struct {
	mu      sync.Mutex
	items   []outMsg
	head    int
	max     int
	events  []outMsg
	evHead  int
	maxEv   int
	writing bool // a writer has the turn
}

func newSendQueue(max, maxEvents int) *sendQueue {
	return &sendQueue{max: max, maxEv: maxEvents}
}

// push queues m, or reports false when max frames wait already. write
// reports that no writer has the turn: the caller has it now and must
// drain the queue (pop until it reports false).
func (q *sendQueue) push(m outMsg) (ok, write bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items)-q.head >= q.max {
		return false, false
	}
	q.items = append(q.items, m)
	if q.writing {
		return true, false
	}
	q.writing = true
	return true, true
}

// pushEvent queues an event frame. When maxEv events wait already, it
// drops the oldest (dropOldest; dropped reports it) or refuses m (ok
// false). write is as push's.
func (q *sendQueue) pushEvent(m outMsg, dropOldest bool) (ok, write, dropped bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.events)-q.evHead >= q.maxEv {
		if !dropOldest {
			return false, false, false
		}
		q.events[q.evHead] = outMsg{}
		q.evHead++
		dropped = true
	}
	if q.evHead >= q.maxEv {
		// Taken and dropped events hold the front: move the waiting
		// ones down, so the room stays about twice the bound.
		n := copy(q.events, q.events[q.evHead:])
		clear(q.events[n:])
		q.events, q.evHead = q.events[:n], 0
	}
	q.events = append(q.events, m)
	if q.writing {
		return true, false, dropped
	}
	q.writing = true
	return true, true, dropped
}

// pop takes the oldest frame for the writer, a reply before an event,
// or reports false when none waits: the writer's turn is over.
func (q *sendQueue) pop() (outMsg, bool) {
	m, _, ok := q.next()
	return m, ok
}

// next is pop that also reports whether more frames wait after m: the
// writer holds m's bytes to write them with the next ones.
func (q *sendQueue) next() (m outMsg, more, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if m, ok = take(&q.items, &q.head); !ok {
		m, ok = take(&q.events, &q.evHead)
	}
	if !ok {
		q.writing = false
		return outMsg{}, false, false
	}
	return m, len(q.items) > q.head || len(q.events) > q.evHead, true
}

// take takes the frame at *head of *items, giving a burst's room back
// when they empty.
func take(items *[]outMsg, head *int) (outMsg, bool) {
	if *head == len(*items) {
		return outMsg{}, false
	}
	m := (*items)[*head]
	(*items)[*head] = outMsg{}
	*head++
	if *head == len(*items) {
		if cap(*items) > 8 {
			*items = nil // a burst's room goes back
		} else {
			*items = (*items)[:0]
		}
		*head = 0
	}
	return m, true
}
