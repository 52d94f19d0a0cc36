package runtime

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestDedupRanOutlivesDroppedAnswer: other callers' answers fill the
// bound on bytes and drop a caller's answer long before its ttl; a copy
// of that call is told it ran (dedupGone), not run again, until the ttl
// is up.
func TestDedupRanOutlivesDroppedAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newDedupTable(0, 30*time.Second)
		tab.maxBytes = 1 << 20
		e, s := seen(tab, "victim", 7)
		if s != dedupNew {
			t.Fatalf("first copy: %v, want new", s)
		}
		tab.finish(e, &Message{Payload: []byte("paid")}, true)
		big := &Message{Payload: bytes.Repeat([]byte{1}, 64<<10)}
		for i := range 64 { // 4 MiB of other callers' answers
			e, _ := seen(tab, fmt.Sprint("other", i%3), uint64(i+1))
			tab.finish(e, big, true)
		}
		if _, s := seen(tab, "victim", 7); s != dedupGone {
			t.Fatalf("copy after the answer was dropped: %v, want dedupGone", s)
		}
		if _, s := seen(tab, "victim", 8); s != dedupNew {
			t.Errorf("another call of the victim: %v, want new", s)
		}
		if _, s := tab.begin(testCaller("victim"), 7, 99); s != dedupOther {
			t.Errorf("the id with another digest: %v, want dedupOther", s)
		}
		time.Sleep(31 * time.Second) // the ttl is up
		if e, s := seen(tab, "victim", 7); s != dedupNew {
			t.Errorf("copy after the ttl: %v, want new", s)
		} else {
			tab.finish(e, &Message{}, true)
		}
	})
}

// TestDedupRanBoundPrefersLargest: past the bound on records, the caller
// holding the most loses its oldest; one with few keeps them.
func TestDedupRanBoundPrefersLargest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newDedupTable(200, 30*time.Second) // generations of 100 answers
		tab.maxRan = 1000
		finishCall := func(caller string, id uint64) {
			e, s := seen(tab, caller, id)
			if s != dedupNew {
				t.Fatalf("%s %d: %v, want new", caller, id, s)
			}
			tab.finish(e, &Message{}, true)
		}
		finishCall("victim", 1)
		for i := range dedupMaxRan + 10 {
			finishCall("flood", uint64(i+1))
		}
		if tab.ranN > dedupMaxRan {
			t.Errorf("%d records kept, want at most %d", tab.ranN, tab.maxRan)
		}
		if _, s := seen(tab, "victim", 1); s != dedupGone {
			t.Errorf("the victim's call: %v, want dedupGone", s)
		}
		if _, s := seen(tab, "flood", 1); s != dedupNew {
			t.Errorf("the flood's oldest call: %v, want its record dropped (new)", s)
		}
	})
}

// TestRanRing: records added a little out of order come out sorted and
// are found by id, across growth and wrapping; the oldest drop first.
func TestRanRing(t *testing.T) {
	var q ranRing
	var want []uint64
	for i := range uint64(300) {
		id := i ^ 1 // pairs swapped: each second record goes before the one added last
		q.add(dedupRan{id: id, at: time.Duration(i)})
		want = append(want, id)
		if i%50 == 49 {
			q.drop(20) // the head moves on, and later adds wrap around
			want = want[20:]
			slices.Sort(want)
		}
	}
	slices.Sort(want)
	var got []uint64
	for i := range q.n {
		got = append(got, q.at(i).id)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("records (-want +got):\n%s", diff)
	}
	for _, id := range want {
		if r, ok := q.find(id); !ok || r.id != id {
			t.Errorf("find(%d) = %v, %v", id, r, ok)
		}
	}
	if _, ok := q.find(want[0] - 1); ok || q.spans(want[0]-1) || q.spans(want[len(want)-1]+1) {
		t.Error("an id outside the records was found")
	}
	if n := q.expire(time.Duration(1000), 0); n != len(want) || q.n != 0 || q.buf != nil {
		t.Errorf("expire dropped %d of %d, left %d and an array of %d", n, len(want), q.n, len(q.buf))
	}
}
