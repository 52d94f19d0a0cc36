package runtime

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

func TestDedupJoinsRunningCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newDedupTable(8, time.Minute)
		e, dup := begin(tab, "c", 1)
		if dup {
			t.Fatal("the first attempt is a duplicate")
		}
		got := make(chan *Message)
		go func() {
			d, dup := begin(tab, "c", 1)
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
		d, dup := begin(tab, "c", 1)
		r, err := tab.wait(t.Context(), d)
		if !dup || err != nil || string(r.Payload) != "42" {
			t.Errorf("after the answer: dup %v, %q, %v; want the stored answer", dup, r.Payload, err)
		}
		if _, dup := begin(tab, "other", 1); dup {
			t.Error("another caller's id 1 is a duplicate")
		}
	})
}

func TestDedupWaitHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newDedupTable(8, time.Minute)
		begin(tab, "c", 1)
		d, _ := begin(tab, "c", 1)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := tab.wait(ctx, d); err != context.DeadlineExceeded {
			t.Errorf("wait = %v, want the deadline", err)
		}
	})
}

func TestDedupForgetsRefusedCalls(t *testing.T) {
	tab := newDedupTable(8, time.Minute)
	e, _ := begin(tab, "c", 1)
	tab.finish(e, &Message{Code: CodeResourceExhausted}, false)
	if _, dup := begin(tab, "c", 1); dup {
		t.Error("a refused call is remembered: its retry would never run")
	}
}

func TestDedupBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// At most 4 answers, dropped 2 at a time: of 5, the last 3 stay;
		// the first 2 are known to have run.
		tab := newDedupTable(4, 10*time.Second)
		for id := range uint64(5) {
			e, _ := begin(tab, "c", id)
			tab.finish(e, &Message{}, true)
		}
		if n := tab.len(); n != 3 {
			t.Errorf("%d answers kept, want 3", n)
		}
		for id, want := range []dedupSeen{dedupGone, dedupGone, dedupCopy, dedupCopy, dedupCopy} {
			if _, s := seen(tab, "c", uint64(id)); s != want {
				t.Errorf("id %d: %v, want %v", id, s, want)
			}
		}
		running, _ := begin(tab, "c", 100) // running calls never expire
		time.Sleep(11 * time.Second)
		if _, dup := begin(tab, "c", 4); dup {
			t.Error("an answer older than the ttl is still kept")
		}
		if _, dup := begin(tab, "c", 100); !dup {
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
	e, _ := begin(tab, caller, 7)
	reply := &Message{Codec: CodecJSON, Payload: frame[10:], Meta: []MetaPair{{"t", unsafe.String(&frame[0], 6)}}}
	want := &Message{Codec: CodecJSON, Payload: []byte("payload"), Meta: []MetaPair{{"t", "caller"}}}
	tab.finish(e, reply, true)
	copy(frame, "XXXXXXXXXXXXXXXXX")
	d, dup := begin(tab, "caller-id", 7)
	if !dup {
		t.Fatal("the stored call was not found by its id")
	}
	got, _ := tab.wait(t.Context(), d)
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(Message{}, raw{})); diff != "" {
		t.Errorf("stored answer changed with the frame (-want +got):\n%s", diff)
	}
}

// TestDedupBoundsBytes: the answers' bytes, each with its bookkeeping,
// are bounded too; the oldest answers make room, half the bound at a time.
func TestDedupBoundsBytes(t *testing.T) {
	tab := newDedupTable(0, time.Minute)
	answer := &Message{Payload: []byte("abcd")}
	charge := dedupCharge(answer)
	tab.maxBytes = 4 * charge
	for id := range uint64(5) {
		e, _ := begin(tab, "c", id)
		tab.finish(e, answer, true)
	}
	for id, want := range []dedupSeen{dedupGone, dedupGone, dedupCopy, dedupCopy, dedupCopy} {
		if _, s := seen(tab, "c", uint64(id)); s != want {
			t.Errorf("id %d: %v, want %v", id, s, want)
		}
	}
	if tab.bytes != 3*charge {
		t.Errorf("%d bytes held, want %d", tab.bytes, 3*charge)
	}
}

// TestDedupExpiredThenRunAgain: a call whose answer expired before the
// ring evicted it runs again when sent again, and its new answer stays
// found after the old slot is evicted.
func TestDedupExpiredThenRunAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newDedupTable(4, 10*time.Second)
		e, _ := begin(tab, "c", 1)
		tab.finish(e, &Message{Payload: []byte("old")}, true)
		time.Sleep(11 * time.Second)
		e, dup := begin(tab, "c", 1)
		if dup {
			t.Fatal("an expired answer was given")
		}
		tab.finish(e, &Message{Payload: []byte("new")}, true) // evicts the expired slot
		for id := range uint64(2) {
			e, _ := begin(tab, "c", 10+id)
			tab.finish(e, &Message{}, true)
		}
		d, dup := begin(tab, "c", 1)
		if !dup {
			t.Fatal("the new answer was lost with the old slot")
		}
		if r, _ := tab.wait(t.Context(), d); string(r.Payload) != "new" {
			t.Errorf("answer %q, want the new one", r.Payload)
		}
	})
}

// TestDedupReusesSlots: a call seen once, once both generations' arrays
// have grown, takes no allocation for its answer or its entry.
func TestDedupReusesSlots(t *testing.T) {
	tab := newDedupTable(64, time.Minute)
	reply := &Message{Codec: CodecProto, Payload: []byte("answer"), Meta: []MetaPair{{"t", "x"}}}
	id := uint64(0)
	call := func() {
		id++
		e, _ := begin(tab, "caller", id)
		tab.finish(e, reply, true)
	}
	for range 128 {
		call()
	}
	if n := testing.AllocsPerRun(100, call); n != 0 {
		t.Errorf("%v allocations per call, want 0", n)
	}
}

// BenchmarkDedup is the table's cost per non-idempotent call on the
// serving node, bounded at 16,384 answers and full: begin, then finish
// with a small answer.
func BenchmarkDedup(b *testing.B) { benchDedup(b, newDedupTable(16384, 30*time.Second)) }

// BenchmarkDedupDefault is BenchmarkDedup at the node's default: no
// bound on the number of answers, so they are kept for the ttl within
// the bound on bytes.
func BenchmarkDedupDefault(b *testing.B) { benchDedup(b, newDedupTable(0, 30*time.Second)) }

func benchDedup(b *testing.B, tab *dedupTable) {
	var callers atomic.Int64
	reply := &Message{Codec: CodecProto, Payload: make([]byte, 9)}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		caller := fmt.Sprint("caller-", callers.Add(1)) // within tokenSize: callers differ
		var id uint64
		for pb.Next() {
			id++
			e, _ := begin(tab, caller, id)
			tab.finish(e, reply, true)
		}
	})
}

// TestDedupIndexModel runs random inserts, forgets and lookups against
// the index and a map side by side, with few distinct hashes and small
// tables, so that runs are long, wrap around the end and mix live and
// dead cells, and the index grows.
func TestDedupIndexModel(t *testing.T) {
	for _, hashes := range []int{4, 64} {
		rnd := rand.New(rand.NewPCG(uint64(hashes), 7))
		x := newDedupIndex(4)
		model := map[uint32]uint32{} // ref → hash
		var refs []uint32
		next := uint32(1)
		for op := range 20000 {
			switch {
			case len(refs) < 200 && rnd.IntN(2) == 0:
				h := uint32(rnd.IntN(hashes)) * 0x9e3779b9
				x.insert(h, next)
				model[next] = h
				refs = append(refs, next)
				next++
			case len(refs) > 0:
				j := rnd.IntN(len(refs))
				ref := refs[j]
				x.forget(x.findRef(model[ref], ref))
				delete(model, ref)
				refs[j] = refs[len(refs)-1]
				refs = refs[:len(refs)-1]
			}
			for ref, h := range model {
				if !indexHas(x, h, ref) {
					t.Fatalf("hashes %d, op %d: ref %d (hash %x) not found", hashes, op, ref, h)
				}
			}
			if indexHas(x, 0x12345, next) {
				t.Fatalf("hashes %d, op %d: a ref never inserted is found", hashes, op)
			}
			if 2*x.used > len(x.cells) {
				t.Fatalf("hashes %d, op %d: %d of %d cells used", hashes, op, x.used, len(x.cells))
			}
		}
	}
}

// indexHas reports whether x holds the cell of hash h and ref, probing as
// find does: until an empty cell.
func indexHas(x dedupIndex, h, ref uint32) bool {
	want := uint64(h)<<32 | uint64(ref)
	for i := uint64(h) & x.mask; x.cells[i] != 0; i = (i + 1) & x.mask {
		if x.cells[i] == want {
			return true
		}
	}
	return false
}

// begin is t.begin for a caller named by a string (its token: the name,
// padded) and a call whose digest is its id: it reports whether the call
// is a copy of one seen before.
func begin(t *dedupTable, caller string, id uint64) (*dedupEntry, bool) {
	e, s := seen(t, caller, id)
	return e, s == dedupCopy
}

// seen begins call id of caller in t, its digest the id, and says what
// the table found.
func seen(t *dedupTable, caller string, id uint64) (*dedupEntry, dedupSeen) {
	return t.begin(testCaller(caller), id, id)
}

// testCaller is the key of a caller whose token is its name.
func testCaller(name string) callerKey {
	var tok [tokenSize]byte
	copy(tok[:], name)
	k, ok := newCallerKey("", string(tok[:]))
	if !ok {
		panic("bad test caller " + name)
	}
	return k
}

// TestDedupBindsTheCall: a stored answer or a running call is found only
// by the same caller (token and transport identity) with the same call:
// another pattern, overlay or payload under the same id is another call.
func TestDedupBindsTheCall(t *testing.T) {
	tab := newDedupTable(8, time.Minute)
	tokA, tokB := strings.Repeat("a", tokenSize), strings.Repeat("b", tokenSize)
	certA, certB := strings.Repeat("A", 32), strings.Repeat("B", 32)
	call := &Message{Pattern: "cmd:transfer,role:bank", Codec: CodecJSON, Payload: []byte(`{"amount":1}`)}
	key := func(id, tok string) callerKey {
		k, ok := newCallerKey(id, tok)
		if !ok {
			t.Fatalf("newCallerKey(%q, %q) failed", id, tok)
		}
		return k
	}
	running, seen := tab.begin(key(certA, tokA), 1, tab.digest(call))
	if seen != dedupNew {
		t.Fatalf("first call: %v", seen)
	}
	check := func(when string) {
		t.Helper()
		other := *call
		other.Payload = []byte(`{"amount":1000}`)
		overlaid := *call
		overlaid.Meta = []MetaPair{{metaOver, "role:bank"}}
		for _, tt := range []struct {
			name string
			k    callerKey
			m    *Message
			want dedupSeen
		}{
			{"the same call", key(certA, tokA), call, dedupCopy},
			{"another token", key(certA, tokB), call, dedupNew},
			{"another certificate", key(certB, tokA), call, dedupNew},
			{"no certificate", key("", tokA), call, dedupNew},
			{"another payload", key(certA, tokA), &other, dedupOther},
			{"another overlay", key(certA, tokA), &overlaid, dedupOther},
		} {
			e, seen := tab.begin(tt.k, 1, tab.digest(tt.m))
			if seen != tt.want {
				t.Errorf("%s, %s: %v, want %v", when, tt.name, seen, tt.want)
			}
			if seen == dedupNew {
				tab.finish(e, &Message{}, false) // forget it again
			}
		}
	}
	check("running")
	tab.finish(running, &Message{Codec: CodecJSON, Payload: []byte(`{"ok":true}`)}, true)
	check("answered")
	for _, bad := range [][2]string{{"", "short"}, {"not 32 bytes", tokA}, {"", tokA + "x"}} {
		if _, ok := newCallerKey(bad[0], bad[1]); ok {
			t.Errorf("newCallerKey(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

// TestDedupDigestLargePayload: a large payload's digest, sampled, still
// tells apart payloads of another length or that differ at either end
// or in a sampled block, and a copy has the same digest.
func TestDedupDigestLargePayload(t *testing.T) {
	tab := newDedupTable(8, time.Minute)
	for _, size := range []int{digestWhole, digestWhole + 1, 64 << 10, 1 << 20} {
		payload := make([]byte, size)
		for i := range payload {
			payload[i] = byte(i * 7)
		}
		call := &Message{Pattern: "cmd:store", Codec: CodecProto, Payload: payload}
		want := tab.digest(call)
		same := *call
		same.Payload = bytes.Clone(payload)
		if got := tab.digest(&same); got != want {
			t.Errorf("%d bytes: a copy's digest %x, want %x", size, got, want)
		}
		changed := map[string][]byte{
			"one byte longer":  append(bytes.Clone(payload), 0),
			"one byte shorter": payload[:size-1],
		}
		for name, at := range map[string]int{"first byte": 0, "last byte": size - 1, "middle sample": digestEdge + 64*((size-2*digestEdge-digestBlock)/(digestSamples-1))} {
			p := bytes.Clone(payload)
			p[at]++
			changed[name] = p
		}
		for name, p := range changed {
			other := *call
			other.Payload = p
			if tab.digest(&other) == want {
				t.Errorf("%d bytes, %s: the same digest", size, name)
			}
		}
	}
}

func BenchmarkDedupDigest(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			tab := newDedupTable(8, time.Minute)
			m := &Message{Pattern: "cmd:echo", Codec: CodecProto, Payload: make([]byte, size)}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				tab.digest(m)
			}
		})
	}
}
