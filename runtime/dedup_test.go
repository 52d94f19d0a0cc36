package runtime

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

func TestDedupJoinsRunningCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newDedupTable(8, time.Minute)
		e, dup := tab.begin("c", 1)
		if dup {
			t.Fatal("the first attempt is a duplicate")
		}
		got := make(chan *Message)
		go func() {
			d, dup := tab.begin("c", 1)
			if !dup {
				t.Error("the second attempt is not a duplicate")
			}
			r, err := tab.wait(t.Context(), d)
			if err != nil {
				t.Error(err)
			}
			got <- r
		}()
		synctest.Wait() // the duplicate is waiting
		tab.finish(e, &Message{Codec: CodecJSON, Payload: []byte("42")}, true)
		if r := <-got; string(r.Payload) != "42" {
			t.Errorf("the duplicate got %q, want the first attempt's answer", r.Payload)
		}
		d, dup := tab.begin("c", 1)
		r, err := tab.wait(t.Context(), d)
		if !dup || err != nil || string(r.Payload) != "42" {
			t.Errorf("after the answer: dup %v, %q, %v; want the stored answer", dup, r.Payload, err)
		}
		if _, dup := tab.begin("other", 1); dup {
			t.Error("another caller's id 1 is a duplicate")
		}
	})
}

func TestDedupWaitHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newDedupTable(8, time.Minute)
		tab.begin("c", 1)
		d, _ := tab.begin("c", 1)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := tab.wait(ctx, d); err != context.DeadlineExceeded {
			t.Errorf("wait = %v, want the deadline", err)
		}
	})
}

func TestDedupForgetsRefusedCalls(t *testing.T) {
	tab := newDedupTable(8, time.Minute)
	e, _ := tab.begin("c", 1)
	tab.finish(e, &Message{Code: CodeResourceExhausted}, false)
	if _, dup := tab.begin("c", 1); dup {
		t.Error("a refused call is remembered: its retry would never run")
	}
}

func TestDedupBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newDedupTable(3, 10*time.Second)
		for id := range uint64(5) {
			e, _ := tab.begin("c", id)
			tab.finish(e, &Message{}, true)
		}
		if n := tab.len(); n != 3 {
			t.Errorf("%d answers kept, want the bound 3", n)
		}
		for id, want := range []bool{false, false, true, true, true} {
			e, dup := tab.begin("c", uint64(id))
			if dup != want {
				t.Errorf("id %d: duplicate %v, want %v", id, dup, want)
			}
			if !dup {
				tab.finish(e, &Message{}, false)
			}
		}
		running, _ := tab.begin("c", 100) // running calls never expire
		time.Sleep(11 * time.Second)
		if _, dup := tab.begin("c", 4); dup {
			t.Error("an answer older than the ttl is still kept")
		}
		if _, dup := tab.begin("c", 100); !dup {
			t.Error("a running call was forgotten")
		}
		tab.finish(running, &Message{}, true)
	})
}

// TestDedupOwnsItsCopies: a caller id and an answer that alias a frame's
// buffer are copied, so reusing the buffer changes nothing stored.
func TestDedupOwnsItsCopies(t *testing.T) {
	tab := newDedupTable(8, time.Minute)
	frame := []byte("caller-id payload")
	caller := unsafe.String(&frame[0], 9)
	e, _ := tab.begin(caller, 7)
	reply := &Message{Codec: CodecJSON, Payload: frame[10:], Meta: []MetaPair{{"t", unsafe.String(&frame[0], 6)}}}
	want := &Message{Codec: CodecJSON, Payload: []byte("payload"), Meta: []MetaPair{{"t", "caller"}}}
	tab.finish(e, reply, true)
	copy(frame, "XXXXXXXXXXXXXXXXX")
	d, dup := tab.begin("caller-id", 7)
	if !dup {
		t.Fatal("the stored call was not found by its id")
	}
	got, _ := tab.wait(t.Context(), d)
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(Message{}, raw{})); diff != "" {
		t.Errorf("stored answer changed with the frame (-want +got):\n%s", diff)
	}
}
