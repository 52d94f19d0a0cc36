package lb

import (
	"testing"
	"testing/synctest"
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
