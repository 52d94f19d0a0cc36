package mux

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"unsafe"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// within reports whether b's bytes lie in room's array.
func within(b, room []byte) bool {
	if len(b) == 0 {
		return false
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(room[:1])))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= start && p+uintptr(len(b)) <= start+uintptr(cap(room))
}

// A small answer is copied into the caller's room, metadata included;
// one that does not fit gets a buffer of its own.
func TestDoRoomHoldsSmallAnswer(t *testing.T) {
	p := newPair(t, echo, Options{}, Options{})
	ctx := context.Background()
	room := make([]byte, 64)
	req := &wire.Frame{Pattern: "role:test", Payload: []byte("small"), Meta: []wire.Meta{{Key: ":t", Value: "pkg.Small"}}}
	var resp wire.Frame
	if ok, err := p.client.DoRoom(ctx, req, &resp, room); !ok || err != nil {
		t.Fatalf("DoRoom: %v, %v", ok, err)
	}
	if string(resp.Payload) != "small" || len(resp.Meta) != 1 || resp.Meta[0] != (wire.Meta{Key: ":t", Value: "pkg.Small"}) {
		t.Fatalf("answer %q %v", resp.Payload, resp.Meta)
	}
	if !within(resp.Payload, room) || !within(unsafe.Slice(unsafe.StringData(resp.Meta[0].Value), len(resp.Meta[0].Value)), room) {
		t.Fatal("the answer is not in the caller's room")
	}

	big := &wire.Frame{Pattern: "role:test", Payload: bytes.Repeat([]byte("b"), 100)}
	var resp2 wire.Frame
	if ok, err := p.client.DoRoom(ctx, big, &resp2, room); !ok || err != nil {
		t.Fatalf("DoRoom: %v, %v", ok, err)
	}
	if !bytes.Equal(resp2.Payload, big.Payload) || within(resp2.Payload, room) {
		t.Fatalf("a larger answer: %q, in room %v", resp2.Payload, within(resp2.Payload, room))
	}
	if string(resp.Payload) != "small" || resp.Meta[0].Value != "pkg.Small" {
		t.Fatalf("the first answer changed: %q %v", resp.Payload, resp.Meta)
	}
}

// The reader reuses its buffer for small frames: every answer a caller
// got keeps its bytes however many frames the connection reads after it,
// with or without room, below and above the reader's buffer size, and
// with calls in flight together.
func TestAnswersKeepTheirBytes(t *testing.T) {
	p := newPair(t, echo, Options{}, Options{})
	ctx := context.Background()
	sizes := []int{1, 10, 100, scratchBody - 64, scratchBody + 100, 3 * scratchBody}
	type kept struct {
		want string
		resp wire.Frame
	}
	const rounds = 20
	results := make([][]kept, 4)
	done := make(chan error, len(results))
	for g := range results {
		go func() {
			for i := range rounds {
				for j, n := range sizes {
					payload := fmt.Sprintf("%d/%d/%d/", g, i, j)
					payload += string(bytes.Repeat([]byte{byte('a' + j)}, max(0, n-len(payload))))
					req := &wire.Frame{Pattern: "role:test", Payload: []byte(payload), Meta: []wire.Meta{{Key: "k", Value: payload[:len(payload)/2]}}}
					var k kept
					k.want = payload
					var room []byte
					if i%2 == 0 {
						room = make([]byte, 128)
					}
					if ok, err := p.client.DoRoom(ctx, req, &k.resp, room); !ok || err != nil {
						done <- fmt.Errorf("DoRoom: %v, %v", ok, err)
						return
					}
					results[g] = append(results[g], k)
				}
			}
			done <- nil
		}()
	}
	for range results {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for _, rs := range results {
		for _, k := range rs {
			if string(k.resp.Payload) != k.want || len(k.resp.Meta) != 1 || k.resp.Meta[0].Value != k.want[:len(k.want)/2] {
				t.Fatalf("answer %.40q (meta %.40v), want %.40q", k.resp.Payload, k.resp.Meta, k.want)
			}
		}
	}
}
