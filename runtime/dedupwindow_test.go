package runtime

import (
	"bytes"
	goruntime "runtime"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestDedupWindowOutlastsLoad: a node's default table keeps an answer
// through the time its caller may take to send the call again (up to
// refeedWindow after the drop) however many other calls it answers
// meanwhile: a count of answers turns over in 80 ms at 200,000 calls a
// second, and the refed call would run again.
func TestDedupWindowOutlastsLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, err := New(WithTransport(newMemNet()), WithListen("dedup-window"))
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		tab := n.dedup
		e, _ := begin(tab, "refed", 1)
		tab.finish(e, &Message{Codec: CodecProto, Payload: []byte("answer")}, true)
		// 200,000 calls a second from other callers for 500 ms.
		reply := &Message{Codec: CodecProto, Payload: make([]byte, 9)}
		for step := range 50 {
			for id := range uint64(2000) {
				e, _ := begin(tab, "other", uint64(step)<<32|id)
				tab.finish(e, reply, true)
			}
			time.Sleep(10 * time.Millisecond)
		}
		d, dup := begin(tab, "refed", 1)
		if !dup {
			t.Fatal("the call refed 500 ms after its answer runs again: the table forgot it")
		}
		if r, _ := tab.wait(t.Context(), d); string(r.Payload) != "answer" {
			t.Errorf("answer %q, want the stored one", r.Payload)
		}
	})
}

// TestDedupRunningAcrossGenerations: a call that runs while its
// generation is dropped is still joined by its copies, and its answer,
// given in a later generation, is found.
func TestDedupRunningAcrossGenerations(t *testing.T) {
	tab := newDedupTable(4, time.Minute) // generations of 2 answers
	long, _ := begin(tab, "c", 1)
	for id := range uint64(9) {
		e, _ := begin(tab, "c", 10+id)
		tab.finish(e, &Message{}, true)
		if d, dup := begin(tab, "c", 1); !dup || d != long {
			t.Fatalf("after %d other answers: the running call is not joined", id+1)
		}
	}
	tab.finish(long, &Message{Payload: []byte("long")}, true)
	d, dup := begin(tab, "c", 1)
	if !dup {
		t.Fatal("the answer of a call that ran across generations is lost")
	}
	if r, _ := tab.wait(t.Context(), d); string(r.Payload) != "long" {
		t.Errorf("answer %q, want %q", r.Payload, "long")
	}
	if n := tab.len(); n > 4 {
		t.Errorf("%d calls kept, want at most 4", n)
	}
}

// TestDedupDropsExpiredGenerations: answers older than the ttl are given
// to no one, and their bytes are released within twice the ttl, once a
// later answer comes.
func TestDedupDropsExpiredGenerations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newDedupTable(0, 10*time.Second)
		tab.stop() // generations dropped as calls come; the sweep is TestDedupSweepsWhenIdle's
		for id := range uint64(100) {
			e, _ := begin(tab, "c", id)
			tab.finish(e, &Message{Payload: []byte("old")}, true)
		}
		time.Sleep(6 * time.Second)
		e, _ := begin(tab, "c", 1000)
		tab.finish(e, &Message{Payload: []byte("new")}, true)
		time.Sleep(5 * time.Second) // the first 100 are 11s old
		for id := range uint64(100) {
			if _, dup := begin(tab, "c", id); dup {
				t.Fatalf("id %d: an answer older than the ttl is given", id)
			}
		}
		if d, dup := begin(tab, "c", 1000); !dup {
			t.Error("an answer within the ttl was dropped")
		} else if r, _ := tab.wait(t.Context(), d); string(r.Payload) != "new" {
			t.Errorf("answer %q, want %q", r.Payload, "new")
		}
		for _, id := range []uint64{2000, 3000} {
			e, _ = begin(tab, "c", id)
			tab.finish(e, &Message{}, true)
			time.Sleep(11 * time.Second)
		}
		if want := 2 * dedupCharge(&Message{}); tab.bytes != want {
			t.Errorf("%d bytes held, want %d: only the last two answers", tab.bytes, want)
		}
	})
}

// TestDedupEncodesSmallResults: a small result left to the transport to
// encode is stored encoded, so the table keeps no pointer for it, and a
// copy of the call gets the encoded payload.
func TestDedupEncodesSmallResults(t *testing.T) {
	tab := newDedupTable(0, time.Minute)
	result := wrapperspb.String("forty-two")
	want, _ := proto.Marshal(result)
	e, _ := begin(tab, "c", 1)
	tab.finish(e, &Message{Codec: CodecProto, body: result, bodyLen: proto.Size(result), Meta: []MetaPair{{metaType, "google.protobuf.StringValue"}}}, true)
	for i := range tab.gens {
		if n := len(tab.gens[i].kept); n != 0 {
			t.Errorf("generation %d keeps %d values by reference, want none", i, n)
		}
	}
	d, _ := begin(tab, "c", 1)
	r, _ := tab.wait(t.Context(), d)
	if r.body != nil || !bytes.Equal(r.Payload, want) || r.Codec != CodecProto || metaValue(r.Meta, metaType) != "google.protobuf.StringValue" {
		t.Errorf("copy: body %v, payload %x, codec %v, meta %v; want the payload %x", r.body, r.Payload, r.Codec, r.Meta, want)
	}
}

// TestDedupFinishingACopy: finishing the entry of a copy (as the
// benchmark once did, its callers' names clipped to one token) changes
// nothing: the call's first answer stays the one given.
func TestDedupFinishingACopy(t *testing.T) {
	tab := newDedupTable(8, time.Minute)
	e, _ := begin(tab, "c", 1)
	tab.finish(e, &Message{Payload: []byte("first")}, true)
	d, dup := begin(tab, "c", 1)
	if !dup {
		t.Fatal("the copy is not a duplicate")
	}
	tab.finish(d, &Message{Payload: []byte("second")}, true)
	tab.finish(e, &Message{Payload: []byte("third")}, true)
	if n := tab.len(); n != 1 {
		t.Errorf("%d calls known, want 1", n)
	}
	d, _ = begin(tab, "c", 1)
	if r, _ := tab.wait(t.Context(), d); string(r.Payload) != "first" {
		t.Errorf("answer %q, want %q", r.Payload, "first")
	}
}

// TestDedupArenaChunks: answers of every size, empty ones and ones larger
// than a chunk among them, are found whole across the chunks of the
// arena, in generations whose chunks are reused.
func TestDedupArenaChunks(t *testing.T) {
	tab := newDedupTable(2000, time.Minute) // generations of 1,000
	payload := func(id uint64) []byte {
		n := int(id*7919) % 3000
		switch id % 97 {
		case 0:
			n = 0
		case 1:
			n = dedupChunk + int(id)
		}
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(id + uint64(i))
		}
		return p
	}
	for id := range uint64(3500) {
		e, _ := begin(tab, "c", id)
		tab.finish(e, &Message{Codec: CodecJSON, Payload: payload(id), Meta: []MetaPair{{"k", strconv.Itoa(int(id))}}}, true)
	}
	for id := uint64(3000); id < 3500; id++ {
		d, dup := begin(tab, "c", id)
		if !dup {
			t.Fatalf("id %d: not found", id)
		}
		r, _ := tab.wait(t.Context(), d)
		if !bytes.Equal(r.Payload, payload(id)) || len(r.Meta) != 1 || r.Meta[0] != (MetaPair{"k", strconv.Itoa(int(id))}) {
			t.Fatalf("id %d: payload of %d bytes, meta %v; want %d bytes, k=%d", id, len(r.Payload), r.Meta, len(payload(id)), id)
		}
	}
}

// TestDedupBurstMemoryReturns: after a burst of calls filled the table,
// calls that come slowly, a generation's ttl apart, leave it holding no
// more than a table that never saw the burst: a generation dropped for
// its age gives its arrays back instead of keeping them for reuse.
func TestDedupBurstMemoryReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newDedupTable(0, 10*time.Second)
		tab.stop() // generations dropped as calls come; the sweep is TestDedupSweepsWhenIdle's
		payload := make([]byte, 200)
		heap := func() int64 { // signed: other tests' garbage may be freed meanwhile
			goruntime.GC()
			var ms goruntime.MemStats
			goruntime.ReadMemStats(&ms)
			return int64(ms.HeapAlloc)
		}
		before := heap()
		id := uint64(0)
		for range 200_000 { // a burst: two generations' index grown, arenas of many chunks
			id++
			e, _ := begin(tab, "c", id)
			tab.finish(e, &Message{Payload: payload}, true)
		}
		held := func() (cells, chunks, slots int) {
			for i := range tab.gens {
				g := &tab.gens[i]
				cells += len(g.index.cells)
				chunks += cap(g.chunks)
				slots += cap(g.slots)
			}
			return
		}
		if cells, chunks, _ := held(); cells <= 2*dedupIndexStart || chunks <= 4 {
			t.Fatalf("the burst left %d index cells and %d arena chunks: too few to show anything", cells, chunks)
		}
		burst := heap() - before
		for range 3 { // slow calls: each finds the current generation older than the ttl
			time.Sleep(11 * time.Second)
			id++
			e, _ := begin(tab, "c", id)
			tab.finish(e, &Message{Payload: payload}, true)
		}
		if cells, chunks, slots := held(); cells > 2*dedupIndexStart || chunks > 2 || slots > 2 {
			t.Errorf("after the burst, with calls a ttl apart: %d index cells, %d arena chunks, %d slot chunks held; want at most %d, 2, 2 (a table's first)",
				cells, chunks, slots, 2*dedupIndexStart)
		}
		// What the arrays point to counts, not only their lengths: a
		// slice cut short still holds every chunk its array does.
		if after := heap() - before; after > burst/8 {
			t.Errorf("the table holds %d KiB of heap after the burst's %d KiB; want at most an eighth", after>>10, burst>>10)
		}
		if d, dup := begin(tab, "c", id); !dup {
			t.Error("the last answer was dropped")
		} else if r, _ := tab.wait(t.Context(), d); len(r.Payload) != len(payload) {
			t.Errorf("the last answer has %d bytes, want %d", len(r.Payload), len(payload))
		}
	})
}

// TestDedupSweepsWhenIdle: a table whose calls stop gives its memory back
// once the last answer has expired, with no call to make room; an answer
// stored meanwhile keeps the sweep away until it has expired too, and a
// stopped table sweeps no more.
func TestDedupSweepsWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newDedupTable(0, 10*time.Second)
		defer tab.stop()
		payload := make([]byte, 200)
		for id := range uint64(200_000) { // a burst
			e, _ := begin(tab, "c", id+1)
			tab.finish(e, &Message{Payload: payload}, true)
		}
		held := func() (bytes, cells int) {
			tab.mu.Lock()
			defer tab.mu.Unlock()
			for i := range tab.gens {
				cells += len(tab.gens[i].index.cells)
			}
			return tab.bytes, cells
		}
		time.Sleep(6 * time.Second)
		e, _ := begin(tab, "c", 1_000_000) // one more answer, 6 s after the burst's
		tab.finish(e, &Message{Payload: payload}, true)
		time.Sleep(5*time.Second + dedupSweepLate) // the burst's answers have expired, not the last one
		synctest.Wait()
		if d, dup := begin(tab, "c", 1_000_000); !dup {
			t.Fatal("the sweep dropped an answer within its ttl")
		} else if _, err := tab.wait(t.Context(), d); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second) // now every answer has
		synctest.Wait()
		if bytes, cells := held(); bytes != 0 || cells > 2*dedupIndexStart {
			t.Errorf("idle past every answer's ttl: %d bytes of answers and %d index cells held; want 0 and at most %d", bytes, cells, 2*dedupIndexStart)
		}
		tab.stop()
		e, _ = begin(tab, "c", 2_000_000)
		tab.finish(e, &Message{Payload: payload}, true)
		time.Sleep(time.Minute)
		synctest.Wait()
		if bytes, _ := held(); bytes == 0 {
			t.Error("a stopped table swept")
		}
	})
}
