package gateway

import "testing"

// TestSendQueue: frames come out in order, at most max wait, an emptied
// queue holds no room of a burst, and exactly one pusher at a time is
// given the writer's turn.
func TestSendQueue(t *testing.T) {
	q := newSendQueue(3, 3)
	for i := range 3 {
		ok, write := q.push(outMsg{b: []byte{byte(i)}})
		if !ok {
			t.Fatalf("push %d refused below the bound", i)
		}
		if write != (i == 0) {
			t.Fatalf("push %d: write = %v, want the turn for the first push only", i, write)
		}
	}
	if ok, _ := q.push(outMsg{b: []byte{9}}); ok {
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
	if _, write := q.push(outMsg{}); !write {
		t.Fatal("a push after the writer's turn ended was not given the turn")
	}
	big := newSendQueue(64, 64)
	for range 64 {
		big.push(outMsg{})
	}
	for range 64 {
		big.pop()
	}
	if big.items != nil {
		t.Errorf("an emptied queue keeps room for %d frames", cap(big.items))
	}
}
