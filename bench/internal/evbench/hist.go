package evbench

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Latencies are filed in buckets growing by 5%: bucket i holds the
// latencies in [1.05^i, 1.05^(i+1)) ns, so a percentile read from them is
// within 5% of the one measured. events.mjs files them the same way.
const (
	histRatio   = 1.05
	histBuckets = 600 // 1.05^600 ns is far beyond any run
)

var logRatio = math.Log(histRatio)

func bucketOf(ns int64) int {
	if ns < 1 {
		return 0
	}
	return min(int(math.Log(float64(ns))/logRatio), histBuckets-1)
}

// bucketValue is the middle of bucket i, in ns.
func bucketValue(i int) float64 {
	return math.Pow(histRatio, float64(i)+0.5)
}

// recorder counts the events a subscriber process handles and files
// their latencies; snap takes what was filed since the last snap.
type recorder struct {
	total   atomic.Uint64
	buckets [histBuckets]atomic.Uint64
}

// got files an event emitted at sent (Unix ns).
func (r *recorder) got(sent int64) {
	r.total.Add(1)
	r.buckets[bucketOf(time.Now().UnixNano()-sent)].Add(1)
}

// snap returns the histogram since the last snap, as a line: "N
// i:c,i:c,..." (N events, c of them in bucket i); "0 -" when none.
func (r *recorder) snap() string {
	var b strings.Builder
	var n uint64
	for i := range r.buckets {
		if c := r.buckets[i].Swap(0); c > 0 {
			if n > 0 {
				b.WriteByte(',')
			}
			n += c
			fmt.Fprintf(&b, "%d:%d", i, c)
		}
	}
	if n == 0 {
		return "0 -"
	}
	return strconv.FormatUint(n, 10) + " " + b.String()
}

// hist is histograms merged in the parent.
type hist struct {
	n int64
	c [histBuckets]int64
}

// add merges a snap line into h.
func (h *hist) add(line string) error {
	ns, buckets, ok := strings.Cut(strings.TrimSpace(line), " ")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil {
		return fmt.Errorf("snap %q: want \"N i:c,...\"", line)
	}
	if n == 0 {
		return nil
	}
	var sum int64
	for f := range strings.SplitSeq(buckets, ",") {
		is, cs, ok := strings.Cut(f, ":")
		i, err1 := strconv.Atoi(is)
		c, err2 := strconv.ParseInt(cs, 10, 64)
		if !ok || err1 != nil || err2 != nil || i < 0 || i >= histBuckets {
			return fmt.Errorf("snap %q: bad bucket %q", line, f)
		}
		h.c[i] += c
		sum += c
	}
	if sum != n {
		return fmt.Errorf("snap %q: buckets hold %d, not %d", line, sum, n)
	}
	h.n += n
	return nil
}

// quantile returns the latency below which a fraction q of the events
// fell (the middle of its bucket; nearest rank).
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	var seen int64
	for i, c := range h.c {
		seen += c
		if seen >= rank {
			return time.Duration(bucketValue(i))
		}
	}
	return time.Duration(bucketValue(histBuckets - 1))
}
