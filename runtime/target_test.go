package runtime

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestTargetCacheSize: the cache of parsed pattern strings stays bounded
// (counted from inside; TestTargetCache_Bound checks the answers) however many distinct
// patterns callers send, and cached resolutions follow Add and Remove.
func TestTargetCacheSize(t *testing.T) {
	n, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	for i := range maxCachedPatterns + 500 {
		_, _ = n.ActE(context.Background(), fmt.Sprintf("role:x,id:%d", i), nil)
	}
	count := 0
	n.parsed.m.Range(func(any, any) bool { count++; return true })
	if count > maxCachedPatterns {
		t.Errorf("target cache holds %d entries, want at most %d", count, maxCachedPatterns)
	}
	// Large patterns: the bytes bound the entries first.
	pad := strings.Repeat("p", 4000)
	for i := range 3000 {
		_, _ = n.ActE(context.Background(), fmt.Sprintf("role:x,id:%d,pad:%s", i, pad), nil)
	}
	bytes := 0
	n.parsed.m.Range(func(k, v any) bool { bytes += v.(*cachedPattern).size(k.(string)); return true })
	if bytes > maxCachedPatternBytes || bytes != n.parsed.bytes {
		t.Errorf("target cache holds %d bytes (counted %d), want at most %d", bytes, n.parsed.bytes, maxCachedPatternBytes)
	}
	// A pattern too large to cache is parsed on every call.
	huge := "role:x,pad:" + strings.Repeat("p", maxCachedPatternSize)
	if _, err := n.ActE(context.Background(), huge, nil); CodeOf(err) != CodeNotFound {
		t.Fatalf("a huge pattern: %v", err)
	}
	if _, ok := n.parsed.m.Load(huge); ok {
		t.Error("a pattern larger than maxCachedPatternSize is cached")
	}

	// A cached resolution is dropped when the routing changes.
	ctx := t.Context()
	if _, err := n.ActE(ctx, "role:y", nil); CodeOf(err) != CodeNotFound {
		t.Fatalf("before Add: %v", err)
	}
	if err := n.Add("role:y", func(context.Context, Request) (any, error) { return "y", nil }); err != nil {
		t.Fatal(err)
	}
	if res, err := n.ActE(ctx, "role:y", nil); err != nil || res.Value() != "y" {
		t.Fatalf("after Add: %v, %v", res.Value(), err)
	}
	if ok, err := n.Remove("role:y"); !ok || err != nil {
		t.Fatalf("Remove: %v, %v", ok, err)
	}
	if _, err := n.ActE(ctx, "role:y", nil); CodeOf(err) != CodeNotFound {
		t.Fatalf("after Remove: %v", err)
	}
}
