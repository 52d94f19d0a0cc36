package gateway

import "testing"

// TestSendQueue: frames come out in order, at most max wait, and an
// emptied queue holds no room of a burst.
func TestSendQueue(t *testing.T) {
	q := newSendQueue(3)
	for i := range 3 {
		if !q.push(outMsg{b: []byte{byte(i)}}) {
			t.Fatalf("push %d refused below the bound", i)
		}
	}
	if q.push(outMsg{b: []byte{9}}) {
		t.Fatal("a fourth frame was queued over the bound of 3")
	}
	for i := range 3 {
		m, ok := q.pop()
		if !ok || m.b[0] != byte(i) {
			t.Fatalf("pop %d = %v, %v", i, m.b, ok)
		}
	}
	if _, ok := q.pop(); ok {
		t.Fatal("pop of an empty queue")
	}
	big := newSendQueue(64)
	for range 64 {
		big.push(outMsg{})
	}
	for range 64 {
		big.pop()
	}
	if big.items != nil {
		t.Errorf("an emptied queue keeps room for %d frames", cap(big.items))
	}
	select {
	case <-big.ready:
	default:
		t.Error("no ready token after pushes")
	}
}
