package runtime

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/runtime/discovery"
)

// balancedPair starts servers a and b of role:r, each answering after the
// delay its function gives, and a client that knows both.
func balancedPair(t *testing.T, delay map[string]func() time.Duration) *Node {
	t.Helper()
	net := newMemNet()
	for _, addr := range []string{"a", "b"} {
		n, _ := memNode(t, net, addr)
		d := delay[addr]
		if err := n.Add("role:r", func(ctx context.Context, r Request) (any, error) {
			if d != nil {
				select {
				case <-time.After(d()):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return addr, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	c, h := memNode(t, net, "c")
	h.host.PeerUp(discovery.Peer{Addr: "a"})
	h.host.PeerUp(discovery.Peer{Addr: "b"})
	synctest.Wait()
	if ps := c.Patterns(); len(ps) != 1 || len(ps[0].Remote) != 2 {
		t.Fatalf("Patterns() = %+v, want role:r at a and b", ps)
	}
	return c
}

// runLoad runs workers callers, each making calls one after another for d,
// and returns the answers by server and the calls that failed.
func runLoad(t *testing.T, c *Node, workers int, d time.Duration, opts ...CallOption) (served map[any]int, failed int) {
	var mu sync.Mutex
	served = map[any]int{}
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for range workers {
		wg.Go(func() {
			for time.Now().Before(end) {
				res, err := c.ActE(t.Context(), "role:r", nil, opts...)
				mu.Lock()
				if err != nil {
					failed++
				} else {
					served[res.Value()]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return served, failed
}

// TestBalancerSpreadsHealthy: two healthy servers share the calls, serial
// or concurrent, about evenly.
func TestBalancerSpreadsHealthy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := func() time.Duration { return time.Millisecond }
		c := balancedPair(t, map[string]func() time.Duration{"a": ms, "b": ms})
		for _, workers := range []int{1, 8} {
			served, failed := runLoad(t, c, workers, 2*time.Second)
			total := served["a"] + served["b"]
			if failed > 0 || served["a"] < total*3/10 || served["b"] < total*3/10 {
				t.Errorf("%d callers: served %v, %d failed; want each of a and b 30%% or more, none failed", workers, served, failed)
			}
		}
	})
}

// TestBalancerAvoidsSlowPeer: with one of two servers 50ms slower, the
// default balancer keeps nearly all the throughput of the fast one (the
// MicroWizard ring, the default before, sent the slow one every other
// call: 0.04x the healthy throughput here).
func TestBalancerAvoidsSlowPeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := func() time.Duration { return time.Millisecond }
		slow := func() time.Duration { return 51 * time.Millisecond }
		healthy := balancedPair(t, map[string]func() time.Duration{"a": ms, "b": ms})
		hs, _ := runLoad(t, healthy, 8, 10*time.Second)
		c := balancedPair(t, map[string]func() time.Duration{"a": ms, "b": slow})
		served, failed := runLoad(t, c, 8, 10*time.Second)
		ratio := float64(served["a"]+served["b"]) / float64(hs["a"]+hs["b"])
		t.Logf("healthy %v; with b 50ms slower %v (%.2fx the throughput)", hs, served, ratio)
		if failed > 0 || ratio < 0.8 {
			t.Errorf("with b 50ms slower: served %v, %d failed, %.2fx the healthy throughput; want at least 0.8x", served, failed, ratio)
		}
	})
}

// TestBalancerAvoidsSilentPeer: a server that stops answering (calls wait
// on it until their timeout) gets no new calls once one waits on it (the
// ring sent it every other call: half the calls failed).
func TestBalancerAvoidsSilentPeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		silent := false
		ms := func() time.Duration { return time.Millisecond }
		hang := func() time.Duration {
			mu.Lock()
			defer mu.Unlock()
			if silent {
				return time.Hour
			}
			return time.Millisecond
		}
		c := balancedPair(t, map[string]func() time.Duration{"a": ms, "b": hang})
		runLoad(t, c, 8, time.Second) // both known, both answering
		mu.Lock()
		silent = true
		mu.Unlock()
		served, failed := runLoad(t, c, 8, 10*time.Second, Timeout(time.Second))
		// Each caller may be caught once, until the balancer sees the
		// first call waiting on b; after that, a takes the calls, and b
		// is tried again only as its average decays (a second's time
		// constant), a call at a time: in 10 s, a few more.
		if failed > 2*8 || served["b"] > 0 || served["a"] < 1000 {
			t.Errorf("b silent for 10s: served %v, %d failed; want all by a, at most two failed calls per caller", served, failed)
		}
		t.Logf("served %v, %d failed", served, failed)
	})
}

// BenchmarkDefaultBalancer: a pick of the default balancer among n
// targets with answers on record, and the bookkeeping of one attempt
// (begin and end) that feeds it.
func BenchmarkDefaultBalancer(b *testing.B) {
	for _, n := range []int{1, 2, 10, 1000} {
		b.Run(fmt.Sprintf("pick/%d", n), func(b *testing.B) {
			bal := new(latencyBalancer)
			for range n {
				p := &peer{}
				p.target.p = p
				p.load.end(p.load.begin(), false)
				bal.Add(&p.target, 1)
			}
			skip := func(*Target) bool { return false }
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, ok := bal.Pick("", skip); !ok {
						b.Fatal("no pick")
					}
				}
			})
		})
	}
	b.Run("attempt", func(b *testing.B) {
		var l load
		b.ReportAllocs()
		for b.Loop() {
			l.end(l.begin(), false)
		}
	})
}

// TestExpNeg: the load's decay stays within its stated bounds of e^-x.
func TestExpNeg(t *testing.T) {
	for x := 0.0; x <= 8; x += 1.0 / 64 {
		got, want := expNeg(x), math.Exp(-x)
		tol := 1.003
		if x > 4 {
			tol = 1.03
		}
		if got < want*(1-1e-12) || got > want*tol {
			t.Errorf("expNeg(%v) = %v, e^-x = %v: want within [1, %v]x", x, got, want, tol)
		}
	}
}

// TestStalledLosesToPeaked: a peer that stopped answering while a call
// waits loses the pick once it has been silent for four times its average
// (5ms at least), even against one whose average a slow answer just
// raised far above its own.
func TestStalledLosesToPeaked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := func() weighted {
			p := &peer{}
			p.target.p = p
			return weighted{&p.target, 1}
		}
		peaked, silent := target(), target()
		pl, sl := &peaked.t.p.load, &silent.t.p.load
		start := pl.begin()
		time.Sleep(100 * time.Millisecond)
		pl.end(start, false) // one answer of 100ms
		start = sl.begin()
		time.Sleep(time.Millisecond)
		sl.end(start, false) // answers in 1ms
		sl.begin()           // and then stops answering
		time.Sleep(4 * time.Millisecond)
		if cheaper(peaked, silent, clock()) {
			t.Error("silent for 4ms (4x its average, under the 5ms floor): lost to the one whose last answer took 100ms")
		}
		time.Sleep(2 * time.Millisecond)
		if !cheaper(peaked, silent, clock()) || cheaper(silent, peaked, clock()) {
			t.Error("silent for 6ms with a call waiting: still preferred to the one whose last answer took 100ms")
		}
	})
}
