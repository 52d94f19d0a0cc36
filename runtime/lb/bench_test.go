package lb

import (
	"fmt"
	"testing"
)

// benchSizes are the target counts every pick benchmark runs at.
var benchSizes = []int{10, 100, 2000, 10000}

// benchPeer stands for a runtime's peer type: a pointer that can carry
// its own breaker.
type benchPeer struct {
	name    string
	breaker *Breaker
}

func benchPeers(n int, bs *Breakers[*benchPeer]) []*benchPeer {
	ps := make([]*benchPeer, n)
	for i := range ps {
		ps[i] = &benchPeer{name: fmt.Sprintf("10.0.%d.%d:7000", i/256, i%256)}
		if bs != nil {
			ps[i].breaker = bs.Get(ps[i])
		}
	}
	return ps
}

var benchBalancers = []struct {
	name string
	new  func() Balancer[*benchPeer]
}{
	{"Ring", func() Balancer[*benchPeer] { return NewRing[*benchPeer]() }},
	{"Random", func() Balancer[*benchPeer] { return NewRandom[*benchPeer]() }},
	{"LeastInFlight", func() Balancer[*benchPeer] { return NewLeastInFlight[*benchPeer](nil) }},
	{"ConsistentHash", func() Balancer[*benchPeer] {
		return mustHash(func(p *benchPeer) string { return p.name }, 0)
	}},
}

// benchKeys are the keys the pick benchmarks cycle through (consistent
// hashing hashes them; the others ignore them).
var benchKeys = func() []string {
	ks := make([]string, 1024)
	for i := range ks {
		ks[i] = fmt.Sprint("user-", i*7919)
	}
	return ks
}()

// BenchmarkPick is one pick (and Done) with unit weights and no skip.
func BenchmarkPick(b *testing.B) {
	for _, bb := range benchBalancers {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/%d", bb.name, n), func(b *testing.B) {
				bal := bb.new()
				for _, p := range benchPeers(n, nil) {
					bal.Add(p, 1)
				}
				bal.Pick("", nil) // a lazy rebuild happens here
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					p, _ := bal.Pick(benchKeys[i&1023], nil)
					bal.Done(p)
					i++
				}
			})
		}
	}
}

// BenchmarkPickBreakers is a pick whose skip consults the breakers by key
// ([Breakers.Skip], which takes a permit), then the permit given back:
// the full per-call cost of balancing and breaking, all circuits closed.
func BenchmarkPickBreakers(b *testing.B) {
	for _, bb := range benchBalancers {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/%d", bb.name, n), func(b *testing.B) {
				bs, err := NewBreakers[*benchPeer]()
				if err != nil {
					b.Fatal(err)
				}
				bal := bb.new()
				for _, p := range benchPeers(n, bs) {
					bal.Add(p, 1)
				}
				bal.Pick("", nil)
				skip := bs.Skip
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					p, _ := bal.Pick(benchKeys[i&1023], skip)
					bal.Done(p)
					bs.Get(p).Success()
					i++
				}
			})
		}
	}
}

// BenchmarkPickBreakersHeld is BenchmarkPickBreakers with each peer
// holding its own *Breaker, as a runtime can: no map lookups.
func BenchmarkPickBreakersHeld(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("Ring/%d", n), func(b *testing.B) {
			bs, err := NewBreakers[*benchPeer]()
			if err != nil {
				b.Fatal(err)
			}
			r := NewRing[*benchPeer]()
			for _, p := range benchPeers(n, bs) {
				r.Add(p, 1)
			}
			skip := func(p *benchPeer) bool { return !p.breaker.Allow() }
			b.ReportAllocs()
			for b.Loop() {
				p, _ := r.Pick("", skip)
				p.breaker.Success()
			}
		})
	}
}

// BenchmarkBreaker is the permit round trip of one breaker.
func BenchmarkBreaker(b *testing.B) {
	bs, err := NewBreakers[string]()
	if err != nil {
		b.Fatal(err)
	}
	br := bs.Get("a")
	b.Run("AllowSuccess", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if br.Allow() {
				br.Success()
			}
		}
	})
	b.Run("SkipGetSuccess", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !bs.Skip("a") {
				bs.Get("a").Success()
			}
		}
	})
	b.Run("IsOpen", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			bs.IsOpen("a")
		}
	})
	b.Run("AllowSuccessParallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if br.Allow() {
					br.Success()
				}
			}
		})
	})
}
