package nats

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestMembersExpire: a node is dropped once deadAfter has passed since
// its last announcement, and a heartbeat puts the moment off.
func TestMembersExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := members{deadAfter: 5 * time.Second, max: 2, m: map[string]*member{}}
		a := announcement{Version: 1, Op: "up", ID: "a", Instance: "a-1", Addr: "wizard.node.a", Digest: "d1"}
		if !ms.up(a, time.Now()) {
			t.Fatal("a new node is not reported")
		}
		time.Sleep(3 * time.Second)
		if ms.up(a, time.Now()) {
			t.Error("the same announcement again is reported as a change")
		}
		time.Sleep(4 * time.Second) // 7s after the first, 4s after the last
		if dead := ms.expire(time.Now()); len(dead) != 0 {
			t.Errorf("dropped %v 4s after its last heartbeat", dead)
		}
		a.Digest = "d2"
		if !ms.up(a, time.Now()) {
			t.Error("a new digest is not reported")
		}
		time.Sleep(5 * time.Second)
		if dead := ms.expire(time.Now()); len(dead) != 1 || dead[0].Digest != "d2" {
			t.Errorf("after the timeout: dropped %v", dead)
		}
		// Bounded: a third node is not tracked.
		ms.up(announcement{Version: 1, Op: "up", Addr: "x"}, time.Now())
		ms.up(announcement{Version: 1, Op: "up", Addr: "y"}, time.Now())
		if ms.up(announcement{Version: 1, Op: "up", Addr: "z"}, time.Now()) || len(ms.m) != 2 {
			t.Errorf("tracked %d nodes, want the bound 2", len(ms.m))
		}
	})
}

// FuzzDecodeAnnouncement: arbitrary data on the announce subject never
// panics the decoder, and what it accepts is within the bounds.
func FuzzDecodeAnnouncement(f *testing.F) {
	f.Add([]byte(`{"v":1,"op":"up","id":"a","instance":"i","addr":"wizard.node.a","transport":"nats","digest":"d"}`))
	f.Add([]byte(`{"v":1,"op":"query"}`))
	f.Add([]byte(`{"v":1,"op":"down","addr":"x"}`))
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := decodeAnnouncement(data)
		if err != nil || a.Op == "query" {
			return
		}
		if len(data) > maxAnnouncement || a.Addr == "" || len(a.Digest) > maxDigest || len(a.Addr) > maxSubject {
			t.Fatalf("accepted %+v from %d bytes", a, len(data))
		}
	})
}
