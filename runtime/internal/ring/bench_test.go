package ring

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchSizes are the ring sizes every pick benchmark runs at.
var benchSizes = []int{10, 100, 2000, 10000}

type benchTarget struct {
	id   int
	open bool
}

func benchRing(n int) (*Ring[*benchTarget], []*benchTarget) {
	r := new(Ring[*benchTarget])
	ts := make([]*benchTarget, n)
	for i := range ts {
		ts[i] = &benchTarget{id: i}
		r.Add(ts[i], 1)
	}
	return r, ts
}

// BenchmarkPick picks with unit weights, so every pick moves the cursor:
// the worst case for memory locality.
func BenchmarkPick(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r, _ := benchRing(n)
			b.ReportAllocs()
			for b.Loop() {
				r.Pick(nil)
			}
		})
	}
}

// BenchmarkPickScattered picks from a ring whose order no longer follows
// memory: built from twice the targets with half removed at random, as a
// long-lived ring ends up after churn.
func BenchmarkPickScattered(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r, ts := benchRing(2 * n)
			rng := rand.New(rand.NewPCG(1, 2))
			for _, i := range rng.Perm(2 * n)[:n] {
				r.Remove(ts[i])
			}
			b.ReportAllocs()
			for b.Loop() {
				r.Pick(nil)
			}
		})
	}
}

// BenchmarkPickSkip picks with a skip func, one target in ten skipped.
func BenchmarkPickSkip(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r, ts := benchRing(n)
			for i, t := range ts {
				t.open = i%10 == 3
			}
			skip := func(t *benchTarget) bool { return t.open }
			b.ReportAllocs()
			for b.Loop() {
				r.Pick(skip)
			}
		})
	}
}

// BenchmarkPickParallel shows the cost of the shared cursor under
// contention.
func BenchmarkPickParallel(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r, _ := benchRing(n)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r.Pick(nil)
				}
			})
		})
	}
}

// BenchmarkRemoveAdd takes a target out and puts it back.
func BenchmarkRemoveAdd(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r, ts := benchRing(n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				t := ts[i%n]
				r.Remove(t)
				r.Add(t, 2)
				i += 7
			}
		})
	}
}
