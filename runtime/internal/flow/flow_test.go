package flow

import (
	"sync/atomic"
	"testing"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// TestSpendAndDeliver: a sender's credit and its receiver's grant count
// alike, a message costing its size plus wire.MessageCost; a message
// larger than the window goes alone, once half the window is free; data
// beyond the grant is refused.
func TestSpendAndDeliver(t *testing.T) {
	var send, recv Flow
	send.Init(wire.InitialWindow, false, nil)
	recv.Init(wire.InitialWindow, false, nil)
	const size = 1 << 10
	n := 0
	for send.Spend(size) {
		if !recv.Deliver(wire.CodecNone, make([]byte, size)) {
			t.Fatalf("message %d: within the sender's credit, refused by the receiver", n)
		}
		n++
	}
	if want := wire.InitialWindow / Cost(size); n != want {
		t.Fatalf("the window took %d messages of %d bytes, want %d", n, size, want)
	}
	if recv.Deliver(wire.CodecNone, make([]byte, size)) {
		t.Fatal("data beyond the grant was queued")
	}
	// The receiver takes half the window: it grants that much back.
	granted := 0
	for granted == 0 {
		_, g := recv.Take(true)
		granted = g
	}
	send.AddCredit(uint32(granted))
	if !send.Spend(wire.InitialWindow) { // larger than the window, half of it free
		t.Fatal("a message larger than the window was held with half the window free")
	}
	if send.Spend(1) {
		t.Fatal("a message was sent with the credit spent")
	}
}

// TestGrow: a default window grows for large messages taken as they
// come, within MaxGrown and the budget, not for small ones, and gives
// its growth back.
func TestGrow(t *testing.T) {
	for _, tc := range []struct {
		size int
		want int
	}{{64 << 10, MaxGrown}, {1 << 10, wire.InitialWindow}} {
		var budget atomic.Int64
		var f Flow
		f.Init(wire.InitialWindow, true, &budget)
		for range 4 * MaxGrown / tc.size {
			if !f.Deliver(wire.CodecNone, make([]byte, tc.size)) {
				t.Fatal("refused")
			}
			f.Take(true)
		}
		if f.Window() != tc.want || budget.Load() != int64(tc.want-wire.InitialWindow) {
			t.Fatalf("%d bytes: window %d, budget %d; want %d", tc.size, f.Window(), budget.Load(), tc.want)
		}
		f.Drop()
		if budget.Load() != 0 {
			t.Fatalf("budget %d after Drop", budget.Load())
		}
	}
	var budget atomic.Int64
	budget.Store(Budget) // spent by others
	var f Flow
	f.Init(wire.InitialWindow, true, &budget)
	for range 64 {
		f.Deliver(wire.CodecNone, make([]byte, 64<<10))
		f.Take(true)
	}
	if f.Window() != wire.InitialWindow {
		t.Fatalf("the window grew to %d with the budget spent", f.Window())
	}
}
