package lb

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestBreakerDrop: a Breaker's own Drop forgets it in its set, as
// Breakers.Drop of its key does, so the next Get starts a closed one; a
// breaker already replaced leaves its successor alone; a Breaker made
// outside a set drops nothing.
func TestBreakerDrop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t)
		a, b := bs.Get("a"), bs.Get("b")
		a.Open()
		a.Drop()
		if bs.Len() != 1 || bs.IsOpen("a") {
			t.Fatalf("after a.Drop: Len %d, IsOpen(a) %v; want 1, false", bs.Len(), bs.IsOpen("a"))
		}
		a2 := bs.Get("a")
		if a2 == a || !a2.Allow() {
			t.Fatal("Get after Drop returned the old, open breaker")
		}
		a2.Success()

		a.Drop() // the old breaker: a2 now holds the key
		if bs.Len() != 2 || bs.Get("a") != a2 {
			t.Errorf("a dropped breaker's Drop forgot its successor: Len %d", bs.Len())
		}
		if bs.Get("b") != b {
			t.Error("a.Drop forgot b")
		}
		new(Breaker).Drop() // not made by a set: nothing to forget
	})
}

// TestConsistentHashEqualHashes: points of equal hash are ordered by
// their owner's name, so the owner of a key landing on them does not
// depend on the order in which targets were added. (Two names' points
// collide with odds of about 2^-64, so no name pair shows it through Pick.)
func TestConsistentHashEqualHashes(t *testing.T) {
	a, b := &hashMember[string]{target: "a", name: "a"}, &hashMember[string]{target: "b", name: "b"}
	pa, pb := hashPoint[string]{hash: 7, owner: a}, hashPoint[string]{hash: 7, owner: b}
	if comparePoints(pa, pb) >= 0 || comparePoints(pb, pa) <= 0 || comparePoints(pa, pa) != 0 {
		t.Errorf("comparePoints of equal hashes: a,b %d; b,a %d; a,a %d; want <0, >0, 0", comparePoints(pa, pb), comparePoints(pb, pa), comparePoints(pa, pa))
	}
	if comparePoints(hashPoint[string]{hash: 6, owner: b}, pa) >= 0 {
		t.Error("a lower hash does not come first whatever the owners")
	}
}

// TestConsistentHashOwnerAtOrAfter: a key goes to the owner of the first
// point at or after its hash, so a key whose hash is exactly a point's
// goes to that point's owner, not the next one's. No real key and name
// are known to hit a point exactly, so the test moves a point onto the
// key's hash in a built circle, which keeps the points sorted.
func TestConsistentHashOwnerAtOrAfter(t *testing.T) {
	c := newHash(3, names(5)...)
	c.Pick("", nil)
	circ := c.circle.Load()
	tried := 0
	for i := range 1000 {
		key := "key-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		h := keyHash(key)
		j := 0
		for j < len(circ.points) && circ.points[j].hash < h {
			j++
		}
		if j >= len(circ.points)-1 || circ.points[j].owner == circ.points[j+1].owner {
			continue // the next point's owner must differ for the test to tell
		}
		tried++
		circ.points[j].hash = h
		want := circ.points[j].owner.target
		if got, _ := c.Pick(key, nil); got != want {
			t.Fatalf("key %q on point %d's hash: Pick = %s, want that point's owner %s (the next point is %s's)", key, j, got, want, circ.points[j+1].owner.target)
		}
		if got, _ := c.Pick(key, func(string) bool { return false }); got != want {
			t.Fatalf("key %q on point %d's hash, skipping none: Pick = %s, want %s", key, j, got, want)
		}
	}
	if tried < 10 {
		t.Fatalf("only %d keys tried", tried)
	}
}

// TestConsistentHashKnownOwners pins the owners of a few keys over a fixed
// set: routing depends only on names, replicas and weights, and must not
// change between versions, or processes on different versions would send
// a key to different targets.
func TestConsistentHashKnownOwners(t *testing.T) {
	c := mustHash(func(s string) string { return s }, 0)
	c.Add("10.0.0.3:7000", 2)
	c.Add("10.0.0.1:7000", 1)
	c.Add("10.0.0.2:7000", 1)
	const a, b, w = "10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"
	// Two points each: their places on the circle.
	two := newHash(2, a, b)
	two.Pick("", nil)
	var points []string
	for _, p := range two.circle.Load().points {
		points = append(points, fmt.Sprintf("%#x %s", p.hash, p.owner.name))
	}
	want := []string{"0x284cc1e1e9b566c1 " + a, "0x7eaeb753bcd4effa " + b, "0xb69bbca73e27f8b3 " + a, "0xd9138b7022ce9092 " + b}
	if diff := cmp.Diff(want, points); diff != "" {
		t.Errorf("points of %s and %s at 2 replicas (-want +got):\n%s", a, b, diff)
	}
	for _, tc := range []struct{ key, owner string }{
		{"", w}, {"a", w}, {"user-1", w}, {"user-2", w}, {"user-3", b}, {"user-4", a},
		{"user-5", b}, {"cart:42", a}, {"order:7", b}, {"session:abc", w}, {"x", w}, {"y", a},
	} {
		if got, _ := c.Pick(tc.key, nil); got != tc.owner {
			t.Errorf("key %q: owner %s, want %s", tc.key, got, tc.owner)
		}
	}
}

// TestConsistentHashIndexShortScan: Pick finds a key's point through the
// index of top bits, then scans a few points at most, never the circle.
func TestConsistentHashIndexShortScan(t *testing.T) {
	c := newHash(0, names(100)...) // 10,000 points
	c.Pick("", nil)
	circ := c.circle.Load()
	longest := 0
	for i := range 20_000 {
		h := keyHash(fmt.Sprint("k", i))
		start := int(circ.first[h>>circ.shift])
		if start > 0 && circ.points[start-1].hash >= h {
			t.Fatalf("index slot of %x starts at point %d, past the key's point", h, start)
		}
		end := start
		for end < len(circ.points) && circ.points[end].hash < h {
			end++
		}
		longest = max(longest, end-start)
	}
	if longest > 32 {
		t.Errorf("longest scan from the index: %d points of %d, want a few", longest, len(circ.points))
	}
}

// TestBreakerOptionEdges: each option accepts the edges of its range and
// refuses the value just outside.
func TestBreakerOptionEdges(t *testing.T) {
	for _, tt := range []struct {
		name string
		opt  BreakerOption
		ok   bool
	}{
		{"threshold 1 of 1", WithFailureThreshold(1, 1), true},
		{"threshold 0 of 1", WithFailureThreshold(0, 1), false},
		{"threshold 2 of 1", WithFailureThreshold(2, 1), false},
		{"rate 1 over 1 call in 1ns", WithFailureRate(1, 1, time.Nanosecond), true},
		{"rate over 0 calls", WithFailureRate(0.5, 0, time.Second), false},
		{"rate in -1ns", WithFailureRate(0.5, 1, -time.Nanosecond), false},
		{"success 1 of 1", WithSuccessThreshold(1, 1), true},
		{"success 3 of 3", WithSuccessThreshold(3, 3), true},
		{"success 3 of 2", WithSuccessThreshold(3, 2), false},
		{"delay 1ns", WithDelay(time.Nanosecond), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewBreakers[string](tt.opt); (err == nil) != tt.ok {
				t.Errorf("NewBreakers: %v, want accepted %v", err, tt.ok)
			}
		})
	}
}
