package runtime

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// catalogHeapProfile names a file for the heap profile (inuse_space) that
// TestCatalogMemory writes once its peers' patterns are routed:
// go test -run TestCatalogMemory -args -catalogheap=FILE.
var catalogHeapProfile = flag.String("catalogheap", "", "write TestCatalogMemory's heap profile to this file")

// scalePeer is a peer of TestCatalogMemory: it serves the first n
// patterns of its set (those of a member of make scale's mesh; replicas
// share a set) and answers catalog pulls as a node does, confirming the
// digest asked when it is its own.
type scalePeer struct {
	id, set string
	n       atomic.Int32
}

func (s *scalePeer) patterns() []string {
	out := make([]string, s.n.Load())
	for i := range out {
		out[i] = fmt.Sprintf("member:%s,op:%d,role:scale", s.set, i)
	}
	return out
}

// announce has d's node hear of s at its n patterns and pull its catalog.
func (s *scalePeer) announce(d *hostDiscovery, n int32) {
	s.n.Store(n)
	d.host.PeerUp(discovery.Peer{ID: s.id, Instance: "i-" + s.id, Addr: s.id, Digest: s.digest()})
}

func (s *scalePeer) digest() string {
	strs := s.patterns()
	pats := make([]pattern.Pattern, len(strs))
	for i, p := range strs {
		pats[i] = pattern.MustParse(p)
	}
	return digestOf(pats)
}

func (s *scalePeer) ServeMessage(_ context.Context, m *Message) *Message {
	d := s.digest()
	var v any = catalog{ID: s.id, Digest: d, Instance: "i-" + s.id, Patterns: s.patterns()}
	if pulledDigest(m.Payload) == d {
		v = catalogConfirmation{Have: d, ID: s.id, Instance: "i-" + s.id}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return errorReply(err)
	}
	return &Message{Codec: CodecJSON, Payload: b}
}

// TestCatalogMemory bounds the heap a node spends on its peers' catalogs:
// at most 64 KiB per 100 remote patterns (the target of make scale's
// "catalog heap per member per 100 remote patterns"). As there, 50 peers
// (members of make scale's mesh) serve 1 pattern each, then 100: each
// announces the digest of 50 patterns (an intermediate catalog that
// gossip caught while the member added its patterns) and then that of
// 100, and the node pulls both. The live heap after a GC, before and
// after, counts what the node keeps for the 99 new patterns of each peer
// (routing, the catalogs cached by digest, the peers' pattern lists);
// heap counts do not depend on timing, but goroutines that earlier tests
// left may allocate meanwhile: up to three rounds, the bound must hold in
// one (what the node keeps, over it, misses it in every round). Skipped
// with the race detector, whose shadow memory and instrumentation change
// what is allocated.
func TestCatalogMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes the heap")
	}
	if *catalogHeapProfile != "" {
		defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
		runtime.MemProfileRate = 1 // every allocation
	}
	const bound = 64 << 10 // bytes per 100 remote patterns
	var per100 float64
	for round := 0; round < 3 && (round == 0 || per100 > bound); round++ {
		per100 = catalogHeapPerPattern(t) * 100
	}
	if per100 > bound {
		t.Errorf("%.1f KiB per 100 remote patterns; want at most %d", per100/1024, bound>>10)
	}
}

// catalogHeapPerPattern is one round of TestCatalogMemory: the live heap the
// node keeps per remote pattern.
func catalogHeapPerPattern(t *testing.T) float64 {
	const peers, patterns, half = 50, 100, 50
	var perPattern float64
	synctest.Test(t, func(t *testing.T) {
		net := newMemNet()
		c, d := memNode(t, net, "c")
		ps := make([]*scalePeer, peers)
		for i := range ps {
			id := fmt.Sprintf("m%d", i)
			ps[i] = &scalePeer{id: id, set: id}
			net.serve(ps[i].id, ps[i])
		}
		announce := func(n int32) {
			for _, p := range ps {
				p.announce(d, n)
			}
			time.Sleep(2 * catalogJitter)
			synctest.Wait()
		}
		announce(1)
		h0 := liveHeap()
		announce(half)
		announce(patterns)
		h1 := liveHeap()
		for _, p := range ps {
			r, ok, err := c.Route(fmt.Sprintf("role:scale,member:%s,op:%d", p.id, patterns-1))
			if err != nil || !ok || len(r.Targets) != 1 || r.Targets[0].ID != p.id {
				t.Fatalf("%s's last pattern: %+v, %v, %v", p.id, r, ok, err)
			}
		}
		if *catalogHeapProfile != "" {
			f, err := os.Create(*catalogHeapProfile)
			if err != nil {
				t.Fatal(err)
			}
			if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		remote := peers * (patterns - 1)
		perPattern = (float64(h1) - float64(h0)) / float64(remote)
		t.Logf("live heap %d → %d bytes for %d remote patterns: %.0f bytes per remote pattern, %.1f KiB per 100", h0, h1, remote, perPattern, perPattern*100/1024)
	})
	return perPattern
}

// liveHeap is the bytes of live heap objects after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC() // what the first one's finalizers freed
	var st runtime.MemStats
	runtime.ReadMemStats(&st)
	return st.HeapAlloc
}

// TestCatalogCacheKeepsWhatIsAnnounced: a catalog that a peer replaced
// leaves the cache once no peer has it loaded or announced; a peer that
// left keeps its last one cached, for its return. The patterns of one
// peer's successive catalogs, and those of replicas whose catalogs
// differ, are one parsed pattern each.
func TestCatalogCacheKeepsWhatIsAnnounced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newMemNet()
		c, d := memNode(t, net, "c")
		a, b := &scalePeer{id: "a", set: "s"}, &scalePeer{id: "b", set: "s"}
		net.serve("a", a)
		net.serve("b", b)
		settle := func() {
			time.Sleep(2 * catalogJitter)
			synctest.Wait()
		}
		r := c.remote
		cached := func(digest string) []pattern.Pattern {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.catalogs[digest]
		}
		a.announce(d, 1)
		b.announce(d, 1)
		settle()
		d1 := a.digest()
		if cached(d1) == nil {
			t.Fatal("the replicas' catalog is not cached")
		}
		a.announce(d, 2)
		settle()
		d2 := a.digest()
		if cached(d1) == nil {
			t.Error("a's first catalog left the cache while b has it loaded")
		}
		// a's second catalog shares the pattern it had, and so does b's.
		first := cached(d1)[0]
		if got := cached(d2); len(got) != 2 || got[0] != first {
			t.Errorf("a's second catalog holds %v, not the pattern its first one parsed", got)
		}
		b.announce(d, 3)
		settle()
		d3 := b.digest()
		if cached(d1) != nil {
			t.Error("the replicas' first catalog is still cached: neither has it loaded or announced")
		}
		if got := cached(d3); len(got) != 3 || got[0] != first || got[1] != cached(d2)[1] {
			t.Errorf("b's catalog holds %v, not the patterns a's parsed", got)
		}
		// b leaves: its catalog stays cached, and it comes back at the
		// cost of a confirmation.
		d.host.PeerDown(discovery.Peer{ID: "b", Instance: "i-b", Addr: "b"})
		time.Sleep(downGrace + time.Second)
		synctest.Wait()
		if cached(d3) == nil {
			t.Error("the catalog of a peer that left is no longer cached")
		}
		full := net.count(net.catalogs, "b")
		b.announce(d, 3)
		settle()
		if got := net.count(net.catalogs, "b") - full; got != 0 {
			t.Errorf("b's catalog pulled in full %d times on its return", got)
		}
		waitRoute(t, c, "member:s,op:2,role:scale", "b")
	})
}

// TestSharedCatalogPatternWithinLimits: a pattern of a peer's catalog
// that the node routes already is taken only within the node's limits,
// as one parsed would be.
func TestSharedCatalogPatternWithinLimits(t *testing.T) {
	routed := pattern.MustParse("a:1,b:2,c:3")
	known := func(s string) (pattern.Pattern, bool) { return routed, s == routed.String() }
	b := []byte(`{"id":"x","patterns":["a:1,b:2,c:3"]}`)
	_, pats, err := decodeCatalogShared(b, &testLimits, known)
	if err != nil || len(pats) != 1 || pats[0] != routed {
		t.Fatalf("decodeCatalogShared = %v, %v; want the routed pattern itself", pats, err)
	}
	for _, c := range []nodeConfig{{maxPatternKeys: 2}, {maxPatternBytes: 8}} {
		lim := newLimits(&c)
		if _, pats, err := decodeCatalogShared(b, &lim, known); err == nil {
			t.Errorf("limits %+v: %v taken", lim, pats)
		}
	}
}
