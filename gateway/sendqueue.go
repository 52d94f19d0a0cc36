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
type sendQueue struct {
	mu      sync.Mutex
	items   []outMsg
	head    int
	max     int
	writing bool // a writer has the turn
}

func newSendQueue(max int) *sendQueue {
	return &sendQueue{max: max}
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

// pop takes the oldest frame for the writer, or reports false when none
// waits: the writer's turn is over.
func (q *sendQueue) pop() (outMsg, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.items) {
		q.writing = false
		return outMsg{}, false
	}
	m := q.items[q.head]
	q.items[q.head] = outMsg{}
	q.head++
	if q.head == len(q.items) {
		if cap(q.items) > 8 {
			q.items = nil // a burst's room goes back
		} else {
			q.items = q.items[:0]
		}
		q.head = 0
	}
	return m, true
}
