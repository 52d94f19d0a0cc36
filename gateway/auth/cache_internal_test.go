package auth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
)

func TestAnswerCacheBounds(t *testing.T) {
	now := time.Now()
	key := func(i int) [sha256.Size]byte { return sha256.Sum256(fmt.Appendf(nil, "token-%d", i)) }
	id := &Identity{Subject: "u"}

	t.Run("entries", func(t *testing.T) {
		c := newAnswerCache(3, 1<<20)
		for i := range 5 {
			c.put(cached{key: key(i), id: id, until: now.Add(time.Hour), size: 10})
		}
		if n, _ := c.len(); n != 3 {
			t.Fatalf("%d entries, want 3", n)
		}
		for i, want := range []bool{false, false, true, true, true} {
			if _, ok := c.get(key(i), now, nil); ok != want {
				t.Errorf("entry %d cached %v, want %v", i, ok, want)
			}
		}
	})
	t.Run("bytes, least recently used first", func(t *testing.T) {
		c := newAnswerCache(100, 3*(entryOverhead+100))
		for i := range 3 {
			c.put(cached{key: key(i), id: id, until: now.Add(time.Hour), size: 100})
		}
		c.get(key(0), now, nil) // 0 is now more recent than 1
		c.put(cached{key: key(3), id: id, until: now.Add(time.Hour), size: 100})
		for i, want := range []bool{true, false, true, true} {
			if _, ok := c.get(key(i), now, nil); ok != want {
				t.Errorf("entry %d cached %v, want %v", i, ok, want)
			}
		}
		if n, b := c.len(); n != 3 || b != 3*(entryOverhead+100) {
			t.Errorf("%d entries of %d bytes, want 3 of %d", n, b, 3*(entryOverhead+100))
		}
		c.put(cached{key: key(9), id: id, until: now.Add(time.Hour), size: 3 * (entryOverhead + 100)}) // larger than the cache
		if _, ok := c.get(key(9), now, nil); ok {
			t.Error("an answer larger than the cache was cached")
		}
	})
	t.Run("expiry", func(t *testing.T) {
		c := newAnswerCache(10, 1<<20)
		c.put(cached{key: key(0), id: id, until: now.Add(time.Second), size: 10})
		if _, ok := c.get(key(0), now.Add(time.Second-1), nil); !ok {
			t.Error("missing before expiry")
		}
		if _, ok := c.get(key(0), now.Add(time.Second), nil); ok {
			t.Error("served at expiry")
		}
		if n, b := c.len(); n != 0 || b != 0 {
			t.Errorf("expired entry kept: %d entries, %d bytes", n, b)
		}
	})
	t.Run("replace", func(t *testing.T) {
		c := newAnswerCache(10, 1<<20)
		c.put(cached{key: key(0), id: id, until: now.Add(time.Second), size: 10})
		c.put(cached{key: key(0), id: id, until: now.Add(time.Hour), size: 20})
		if n, b := c.len(); n != 1 || b != entryOverhead+20 {
			t.Errorf("%d entries of %d bytes, want 1 of %d", n, b, entryOverhead+20)
		}
	})
}

// TestDelegateKeysByHash: the cache holds the token's SHA-256, never the
// token.
func TestDelegateKeysByHash(t *testing.T) {
	n, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	err = n.Add("role:auth,cmd:verify", func(context.Context, runtime.Request) (any, error) {
		return map[string]any{"subject": "u", "expires_at": time.Now().Add(time.Hour).Unix()}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDelegate(DelegateOptions{Caller: n, Pattern: "role:auth,cmd:verify"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const token = "secret-token-value"
	if _, err := d.Verify(t.Context(), token); err != nil {
		t.Fatal(err)
	}
	d.cache.mu.Lock()
	defer d.cache.mu.Unlock()
	if _, ok := d.cache.m[sha256.Sum256([]byte(token))]; !ok || len(d.cache.m) != 1 {
		t.Errorf("cache keys %v, want only the token's SHA-256", d.cache.m)
	}
	for e := d.cache.lru.Front(); e != nil; e = e.Next() {
		if s := fmt.Sprintf("%+v", *e.Value.(*cached)); strings.Contains(s, token) {
			t.Errorf("a cache entry holds the token: %s", s)
		}
	}
}
