//go:build linux

package faults_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// window is the width over which the ok rate must recover, in buckets.
const window = int(time.Second / bucket)

// doubled counts the once keys that ran more than once.
func (r *results) doubled() int {
	n := 0
	for _, c := range r.execs {
		if c > 1 {
			n++
		}
	}
	return n
}

// unexecuted counts the once calls answered ok whose key no server ran.
func (r *results) unexecuted() int {
	n := 0
	for _, k := range r.caller.OKKeys {
		if r.execs[k] == 0 {
			n++
		}
	}
	return n
}

// failed counts the calls of kind that ended in buckets [from, to).
func (r *results) failed(kind, from, to int) int {
	n := 0
	for _, b := range r.buckets(from, to) {
		n += b.Failed[kind]
	}
	return n
}

// buckets returns the caller's buckets [from, to), clipped.
func (r *results) buckets(from, to int) []bucketCounts {
	bs := r.caller.Buckets
	from, to = max(from, 0), min(to, len(bs))
	if from >= to {
		return nil
	}
	return bs[from:to]
}

// okRate is the rate of ok calls (both kinds) in buckets [from, to), per
// second.
func (r *results) okRate(from, to int) float64 {
	bs := r.buckets(from, to)
	if len(bs) == 0 {
		return 0
	}
	n := 0
	for _, b := range bs {
		n += b.OK[idem] + b.OK[once]
	}
	return float64(n) / (float64(len(bs)) * bucket.Seconds())
}

// servedBy counts the ok calls server id answered in buckets [from, to).
func (r *results) servedBy(id string, from, to int) int {
	n := 0
	for _, b := range r.buckets(from, to) {
		n += b.By[id]
	}
	return n
}

// routeAround measures how long after a fault that started in bucket f0
// and ended in f1 the caller routed around it: until both no call started
// later failed and the ok rate is back at half the rate before the fault
// or more, in that bucket and over every 1 s window from it to the
// fault's end. ok is false when that did not happen at least 1 s before
// the fault ended.
func (r *results) routeAround(f0, f1 int) (d time.Duration, ok bool) {
	base := r.okRate(max(f0-2*window, window), f0)
	lastFail := f0 - 1
	for i, b := range r.buckets(f0, f1) {
		if b.FailedStart[idem]+b.FailedStart[once] > 0 {
			lastFail = f0 + i
		}
	}
	recovered := -1
	for t := f1 - window; t >= f0; t-- {
		if r.okRate(t, t+window) < base/2 {
			break
		}
		recovered = t
	}
	// A window at half the rate may hold a stall in its first half: the
	// recovery is the first bucket at half the rate or more.
	for recovered >= 0 && recovered < f1 && r.okRate(recovered, recovered+1) < base/2 {
		recovered++
	}
	if recovered < 0 || recovered >= f1 || lastFail >= f1-window {
		return 0, false
	}
	return time.Duration(max(recovered, lastFail+1)-f0) * bucket, true
}

// errorSummary lists the errors by kind and code.
func (r *results) errorSummary() string {
	var parts []string
	for kind, m := range r.caller.Errors {
		for _, code := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, fmt.Sprintf("%s %s ×%d", kindNames[kind], code, m[code]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// totals counts the ok and failed calls of kind over the whole run.
func (r *results) totals(kind int) (ok, failed int) {
	for _, b := range r.caller.Buckets {
		ok += b.OK[kind]
		failed += b.Failed[kind]
	}
	return ok, failed
}

// timeline logs the caller's calls per half second around a fault that
// started at bucket f0: ok calls in all and by server, and failures by
// the half second they started in.
func (r *results) timeline(log func(string, ...any), f0 int) {
	const step = 5
	var b strings.Builder
	for from := 0; from < len(r.caller.Buckets); from += step {
		ok, failed := 0, 0
		by := map[string]int{}
		for _, bc := range r.buckets(from, from+step) {
			ok += bc.OK[idem] + bc.OK[once]
			failed += bc.FailedStart[idem] + bc.FailedStart[once]
			for id, n := range bc.By {
				by[id] += n
			}
		}
		fmt.Fprintf(&b, "\n%+6.1f s  ok %5d  failed %4d ", float64(from-f0)*bucket.Seconds(), ok, failed)
		for _, id := range slices.Sorted(maps.Keys(by)) {
			fmt.Fprintf(&b, " %s %5d", id, by[id])
		}
	}
	log("calls per 0.5 s, from the fault's start (failures by when they started):%s", b.String())
}
