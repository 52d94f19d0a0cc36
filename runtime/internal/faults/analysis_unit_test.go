//go:build linux

package faults_test

import (
	"testing"
	"time"
)

// load makes a caller report of n buckets at rate ok calls a bucket,
// with fn changing each bucket.
func load(n, ok int, fn func(i int, b *bucketCounts)) *results {
	r := &results{execs: map[string]int{}}
	for i := range n {
		b := bucketCounts{I: i, OK: [2]int{ok / 2, ok - ok/2}, By: map[string]int{"s1": ok / 2, "s2": ok - ok/2}}
		if fn != nil {
			fn(i, &b)
		}
		r.caller.Buckets = append(r.caller.Buckets, b)
	}
	return r
}

// TestRouteAround: the measure the route-around target is judged by, on
// made-up timelines: a fault from bucket 30 to 80 (5 s).
func TestRouteAround(t *testing.T) {
	const f0, f1 = 30, 80
	tests := []struct {
		name string
		fn   func(i int, b *bucketCounts)
		want time.Duration
		ok   bool
	}{
		{"no effect", nil, 0, true},
		{"stall then recovery after 1.5 s", func(i int, b *bucketCounts) {
			if i >= f0 && i < f0+15 {
				b.OK = [2]int{}
			}
		}, 1500 * time.Millisecond, true},
		{"recovered rate but a failure started at 2.5 s", func(i int, b *bucketCounts) {
			if i == f0+25 {
				b.FailedStart[idem] = 1
			}
		}, 2600 * time.Millisecond, true},
		{"stalled to the end", func(i int, b *bucketCounts) {
			if i >= f0 {
				b.OK = [2]int{}
			}
		}, 0, false},
		{"a failure in the last second", func(i int, b *bucketCounts) {
			if i == f1-3 {
				b.FailedStart[once] = 1
			}
		}, 0, false},
		{"a dip below half after a recovery", func(i int, b *bucketCounts) {
			if i >= f0 && i < f0+5 || i >= f0+30 && i < f0+40 {
				b.OK = [2]int{}
			}
		}, 4000 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := load(100, 80, tt.fn)
			d, ok := r.routeAround(f0, f1)
			if d != tt.want || ok != tt.ok {
				t.Errorf("routeAround = %v, %v; want %v, %v", d, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestDoubled: a key run on two servers, or twice on one, counts once
// as doubled; an ok key no server ran counts as unexecuted.
func TestDoubled(t *testing.T) {
	r := &results{execs: map[string]int{"a": 1, "b": 2, "c": 3}}
	r.caller.OKKeys = []string{"a", "b", "x"}
	if got := r.doubled(); got != 2 {
		t.Errorf("doubled = %d, want 2", got)
	}
	if got := r.unexecuted(); got != 1 {
		t.Errorf("unexecuted = %d, want 1", got)
	}
}
