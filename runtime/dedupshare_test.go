package runtime

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestDedupSharesLargeOwnedAnswers: a large payload the node encoded for
// its answer is kept by the table as it is, not copied, and given to a
// copy of the call; it is released when its slot is evicted.
func TestDedupSharesLargeOwnedAnswers(t *testing.T) {
	tab := newDedupTable(2, time.Minute)
	payload := bytes.Repeat([]byte{7}, dedupShareMin)
	e, _ := begin(tab, "c", 1)
	tab.finish(e, &Message{Codec: CodecProto, Payload: payload, owned: true, Meta: []MetaPair{{"t", "x"}}}, true)
	if want := len(payload) + 2 + 8 + dedupAnswerCost; tab.bytes != want {
		t.Errorf("%d bytes held, want %d", tab.bytes, want)
	}
	d, dup := begin(tab, "c", 1)
	if !dup {
		t.Fatal("the stored call was not found by its id")
	}
	got, _ := tab.wait(t.Context(), d)
	if len(got.Payload) != len(payload) || &got.Payload[0] != &payload[0] {
		t.Error("the stored answer's payload is a copy, want the answer's own")
	}
	if len(got.Meta) != 1 || got.Meta[0] != (MetaPair{"t", "x"}) {
		t.Errorf("metadata %v, want [{t x}]", got.Meta)
	}
	for id := range uint64(2) { // drop its generation
		e, _ := begin(tab, "c", 10+id)
		tab.finish(e, &Message{}, true)
	}
	for i := range tab.gens {
		for j, kv := range tab.gens[i].kept[:cap(tab.gens[i].kept)] {
			if kv.shared != nil {
				t.Errorf("generation %d, kept %d: still holds a shared payload after it was dropped", i, j)
			}
		}
	}
	if want := 2 * dedupAnswerCost; tab.bytes != want {
		t.Errorf("%d bytes held after the drop, want %d", tab.bytes, want)
	}
}

// TestDedupCopiesLargeBorrowedAnswers: a large payload the node did not
// encode itself (a handler's bytes, a received payload) is copied, so
// that its owner reusing it changes nothing stored; so is a small one the
// node encoded.
func TestDedupCopiesLargeBorrowedAnswers(t *testing.T) {
	for _, c := range []struct {
		name  string
		size  int
		owned bool
	}{{"borrowed", dedupShareMin, false}, {"small", dedupShareMin - 1, true}} {
		t.Run(c.name, func(t *testing.T) {
			tab := newDedupTable(8, time.Minute)
			payload := bytes.Repeat([]byte{7}, c.size)
			e, _ := begin(tab, "c", 1)
			tab.finish(e, &Message{Codec: CodecJSON, Payload: payload, owned: c.owned}, true)
			payload[0] = 8
			d, _ := begin(tab, "c", 1)
			got, _ := tab.wait(t.Context(), d)
			if len(got.Payload) != c.size || got.Payload[0] != 7 {
				t.Error("the stored answer changed with the handler's buffer")
			}
		})
	}
}

// TestOwnedPayload: only a protobuf result, which encodePayload marshals
// afresh, has a payload of its own.
func TestOwnedPayload(t *testing.T) {
	for _, c := range []struct {
		v    any
		want bool
	}{
		{wrapperspb.Bytes([]byte("x")), true},
		{[]byte("x"), false},
		{&raw{codec: CodecProto, data: []byte("x")}, false},
		{nil, false},
	} {
		if got := ownedPayload(c.v); got != c.want {
			t.Errorf("ownedPayload(%T) = %v, want %v", c.v, got, c.want)
		}
	}
}
