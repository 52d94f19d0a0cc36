package gateway

import "sync"

// sendQueue is a connection's bounded queue of frames to send, grown as
// frames wait and given back when it empties: a thousand idle
// connections hold no room for frames (a channel of the bound reserved
// 256 slots, 16 KiB, for each).
type sendQueue struct {
	mu    sync.Mutex
	items []outMsg
	head  int
	max   int
	ready chan struct{} // a token when frames wait; capacity 1
}

func newSendQueue(max int) *sendQueue {
	return &sendQueue{max: max, ready: make(chan struct{}, 1)}
}

// push queues m, or reports false when max frames wait already.
func (q *sendQueue) push(m outMsg) bool {
	q.mu.Lock()
	if len(q.items)-q.head >= q.max {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, m)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

// pop takes the oldest frame, or reports false when none waits.
func (q *sendQueue) pop() (outMsg, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.items) {
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
