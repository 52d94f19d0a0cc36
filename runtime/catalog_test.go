package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/introspect"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// hostileCatalogs are servers that are not what discovery said of them:
// each is announced with the digest of a node the caller has cached.
func hostileCatalogs(t *testing.T, known string) map[string]Server {
	other := []pattern.Pattern{pattern.MustParse("role:other")}
	otherJSON, err := json.Marshal(catalog{ID: "h", Digest: digestOf(other), Patterns: []string{"role:other"}})
	if err != nil {
		t.Fatal(err)
	}
	answer := func(b []byte) Server {
		return serverFunc(func(context.Context, *Message) *Message { return &Message{Codec: CodecJSON, Payload: b} })
	}
	return map[string]Server{
		// Takes the pull and never answers it.
		"silent": serverFunc(func(ctx context.Context, m *Message) *Message {
			<-ctx.Done()
			return errorReply(ctx.Err())
		}),
		"refuses":  serverFunc(func(context.Context, *Message) *Message { return errorReply(Errorf(CodeNotFound, "no")) }),
		"garbage":  answer([]byte("<html>")),
		"other":    answer(otherJSON),
		"confirms": answer([]byte(`{"have":"AAAAAAAAAAAAAAAAAAAAAA","id":"h"}`)), // a digest not asked
		"padded":   answer([]byte(`{"have":"` + known + `","id":"h","patterns":["role:other"]}`)),
	}
}

// TestGossipedDigestNeedsItsOwnPull: a member that announces the digest of
// a pattern set the caller has cached is routed only when its own catalog
// pull, over its own connection, confirms it. One that never answers the
// pull, refuses it, answers garbage, answers another catalog or confirms a
// digest it was not asked gets no call for those patterns.
func TestGossipedDigestNeedsItsOwnPull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newMemNet()
		s, _ := memNode(t, net, "s", "role:r")
		c, d := memNode(t, net, "c")
		d.host.PeerUp(discovery.Peer{ID: "s", Instance: s.instance, Addr: "s", Digest: s.digest()})
		time.Sleep(catalogJitter)
		synctest.Wait()
		var hostile []string
		for name, srv := range hostileCatalogs(t, s.digest()) {
			addr := "h-" + name
			net.serve(addr, srv)
			hostile = append(hostile, addr)
			d.host.PeerUp(discovery.Peer{ID: addr, Instance: "x", Addr: addr, Digest: s.digest()})
		}
		// Past the pulls' timeout.
		time.Sleep(c.remote.pullTimeout() + time.Second)
		synctest.Wait()
		for _, pi := range c.Patterns() {
			switch pi.Pattern.String() {
			case "role:r":
				if !slices.Equal(pi.Remote, []string{"s"}) {
					t.Errorf("role:r routed to %v, want [s]", pi.Remote)
				}
			case "role:other":
				if !slices.Equal(pi.Remote, []string{"h"}) {
					t.Errorf("role:other routed to %v, want [h]: the catalog h-other answered", pi.Remote)
				}
			default:
				t.Errorf("%v routed to %v", pi.Pattern, pi.Remote)
			}
		}
		for range 20 {
			if res, err := c.ActE(t.Context(), "role:r", nil); err != nil || res.Value() != "s" {
				t.Fatalf("role:r: %v, %v; want s's answer", res.Value(), err)
			}
		}
		for _, addr := range hostile {
			if got := net.count(net.calls, addr); got != 0 {
				t.Errorf("%s got %d calls", addr, got)
			}
			if net.count(net.dials, addr) == 0 {
				t.Errorf("%s was not dialled", addr)
			}
		}
	})
}

// TestReplicaJoinCostsAConfirmation: replicas of one service share one
// full catalog pull; every other replica costs a pull that its own node
// answers with the digest alone, and so does each periodic refresh of a
// peer without gossip.
func TestReplicaJoinCostsAConfirmation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newMemNet()
		const replicas = 5
		var digest string
		for i := range replicas {
			s, _ := memNode(t, net, "s"+string(rune('0'+i)), "role:math,cmd:sum", "role:math,cmd:mul")
			digest = s.digest()
		}
		c, d := memNode(t, net, "c")
		for i := range replicas {
			addr := "s" + string(rune('0'+i))
			d.host.PeerUp(discovery.Peer{ID: addr, Addr: addr, Digest: digest})
			time.Sleep(catalogJitter)
			synctest.Wait()
		}
		if got := len(c.Patterns()[0].Remote); got != replicas {
			t.Fatalf("%d targets, want %d", got, replicas)
		}
		full, confirms := 0, 0
		for i := range replicas {
			addr := "s" + string(rune('0'+i))
			full += net.count(net.catalogs, addr)
			confirms += net.count(net.confirms, addr)
		}
		if full != 1 || confirms != replicas-1 {
			t.Errorf("%d full catalogs and %d confirmations, want 1 and %d", full, confirms, replicas-1)
		}

		// Without gossip, each refresh is a confirmation.
		st, _ := memNode(t, net, "st", "role:static")
		d.host.PeerUp(discovery.Peer{Addr: "st"})
		synctest.Wait()
		time.Sleep(5*c.remote.refresh + time.Millisecond)
		synctest.Wait()
		if got := net.count(net.catalogs, "st"); got != 1 {
			t.Errorf("the static peer's catalog pulled in full %d times, want once", got)
		}
		if got := net.count(net.confirms, "st"); got != 5 {
			t.Errorf("%d confirmations from the static peer over 5 refreshes", got)
		}
		// A change is a full pull at the next refresh.
		if err := st.Add("role:static,cmd:new", func(context.Context, Request) (any, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
		time.Sleep(c.remote.refresh)
		synctest.Wait()
		if got := net.count(net.catalogs, "st"); got != 2 {
			t.Errorf("after a change: %d full pulls, want 2", got)
		}
		waitRoute(t, c, "cmd:new,role:static", "st")
	})
}

// TestCatalogContradictsDiscovery: discovery names the node at an address
// with an id and an instance that node does not answer with. The node is
// not routed, the contradiction is logged once with both ids, discovery
// repeating itself dials it no more, and a death notice for the announced
// run removes the record. Announced as itself, the node is routed; a later
// claim of another member for its address, and that member's death
// notice, change nothing.
func TestCatalogContradictsDiscovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs testlog.Buffer
		net := newMemNet()
		s, _ := memNode(t, net, "s", "role:r")
		c, d := memNode(t, net, "c")
		c.log = logs.Logger()
		claim := discovery.Peer{ID: "evil", Instance: "x", Addr: "s", Digest: s.digest()}
		d.host.PeerUp(claim)
		time.Sleep(catalogJitter)
		synctest.Wait()
		if _, err := c.ActE(t.Context(), "role:r", nil); err == nil {
			t.Errorf("role:r routed to a claim the node contradicts")
		}
		ms := c.Members()
		if len(ms) != 2 || ms[1].ID != "evil" || ms[1].Connected || !strings.Contains(ms[1].LastError, `"s"`) {
			t.Errorf("Members() = %+v, want the claim listed, not connected, with the id s answered", ms)
		}
		const logged = "it answers as another node than discovery announced"
		if got := strings.Count(logs.String(), logged); got != 1 || !strings.Contains(logs.String(), "announced=evil announced_instance=x id=s ") {
			t.Errorf("the contradiction logged %d times, want once with both ids:\n%s", got, logs.String())
		}
		dials := net.count(net.dials, "s")
		claim.Suspect = true
		d.host.PeerUp(claim)
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := net.count(net.dials, "s"); got != dials {
			t.Errorf("%d dials as discovery repeated itself", got-dials)
		}
		d.host.PeerDown(claim)
		if ms := c.Members(); len(ms) != 1 {
			t.Errorf("after a death notice for the announced run: Members() = %+v, want none but itself", ms)
		}

		// Announced as itself, it is routed.
		self := discovery.Peer{ID: "s", Instance: s.instance, Addr: "s", Digest: s.digest()}
		d.host.PeerUp(self)
		synctest.Wait()
		waitRoute(t, c, "role:r", "s")
		// Another member's claim for its address: asked again, answered
		// as one announced there.
		d.host.PeerUp(claim)
		synctest.Wait()
		d.host.PeerDown(claim)
		waitRoute(t, c, "role:r", "s")
		if _, err := c.ActE(t.Context(), "role:r", nil); err != nil {
			t.Errorf("after another member's claim and death notice: %v", err)
		}
		if got := strings.Count(logs.String(), logged); got != 1 {
			t.Errorf("the contradiction logged %d times in all, want once:\n%s", got, logs.String())
		}
	})
}

// TestCatalogConfirmationServed: a node answers a pull that names its own
// digest with the digest alone, and any other pull in full.
func TestCatalogConfirmationServed(t *testing.T) {
	n, _ := memNode(t, newMemNet(), "n", "role:a")
	pull := func(payload string) string {
		reply := n.serveRemote(t.Context(), &Message{Pattern: introspect.CatalogPattern, Codec: CodecJSON, Payload: []byte(payload)})
		return string(reply.Payload)
	}
	if got, want := pull(`{"have":"`+n.digest()+`"}`), `{"have":"`+n.digest()+`","id":"`+n.id+`","instance":"`+n.instance+`"}`; got != want {
		t.Errorf("a pull naming the node's digest: %s, want %s", got, want)
	}
	for _, payload := range []string{"", `{"have":"AAAAAAAAAAAAAAAAAAAAAA"}`, "garbage", `{"have":"` + n.digest() + `"` + strings.Repeat(" ", 1000) + "}"} {
		if got := pull(payload); !strings.Contains(got, `"patterns":["role:a"]`) {
			t.Errorf("a pull with %.40q: %s, want the full catalog", payload, got)
		}
	}
}

// TestConfirmationOfAnotherDigestRejected: a confirmation counts only for
// the digest asked.
func TestConfirmationOfAnotherDigestRejected(t *testing.T) {
	cached := []pattern.Pattern{pattern.MustParse("role:a")}
	have := digestOf(cached)
	for name, tt := range map[string]struct {
		reply string
		ok    bool
	}{
		"confirms":       {`{"have":"` + have + `","id":"x","instance":"i"}`, true},
		"another digest": {`{"have":"AAAAAAAAAAAAAAAAAAAAAA","id":"x"}`, false},
		"with patterns":  {`{"have":"` + have + `","id":"x","patterns":["role:b"]}`, false},
		"with a digest":  {`{"have":"` + have + `","id":"x","digest":"` + have + `"}`, false},
		"full":           {`{"id":"x","patterns":["role:b"]}`, true},
	} {
		t.Run(name, func(t *testing.T) {
			c, pats, err := readCatalog([]byte(tt.reply), have, cached, &testLimits, nil)
			if tt.ok != (err == nil) {
				t.Fatalf("readCatalog: %v, want ok %v", err, tt.ok)
			}
			if err == nil && c.ID != "x" {
				t.Errorf("id %q", c.ID)
			}
			if name == "confirms" && (!slices.EqualFunc(pats, cached, pattern.Pattern.Equal) || c.Instance != "i") {
				t.Errorf("confirmed %v %+v, want the cached patterns", pats, c)
			}
		})
	}
	if _, _, err := readCatalog([]byte(`{"have":"`+have+`","id":"x"}`), "", nil, &testLimits, nil); err == nil || !errors.Is(err, errUnaskedConfirmation) {
		t.Errorf("a confirmation nobody asked for: %v", err)
	}
}

// BenchmarkCatalogPull is the CPU a catalog pull costs both sides, network
// aside: the serving node builds and encodes its catalog, the fetching
// node decodes it, parses every pattern and checks the digest. The
// confirm cases are the pull of a node whose digest the caller has cached
// (a replica of a known service): the serving node answers its digest
// alone.
func BenchmarkCatalogPull(b *testing.B) {
	for _, size := range []int{10, 500, 5000} {
		n, err := New(WithTransport(newMemNet()), WithListen("bench"))
		if err != nil {
			b.Fatal(err)
		}
		defer n.Close()
		for i := range size {
			if err := n.Add(fmt.Sprintf("role:svc%d,cmd:op%d", i%50, i), func(context.Context, Request) (any, error) { return nil, nil }); err != nil {
				b.Fatal(err)
			}
		}
		_, cached, err := readCatalog(n.serveRemote(context.Background(), &Message{Pattern: introspect.CatalogPattern}).Payload, "", nil, &testLimits, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, confirm := range []bool{false, true} {
			name, have := fmt.Sprint(size), ""
			if confirm {
				name, have = name+"-confirm", n.digest()
			}
			b.Run(name, func(b *testing.B) {
				var size int
				for b.Loop() {
					size = pullOnce(b, n, have, cached)
				}
				b.ReportMetric(float64(size), "catalog-bytes")
			})
		}
	}
}

// pullOnce is one pull of n's catalog naming have, and returns the size of
// the answer.
func pullOnce(b *testing.B, n *Node, have string, cached []pattern.Pattern) int {
	req := &Message{Pattern: introspect.CatalogPattern}
	if have != "" {
		req.Codec, req.Payload = CodecJSON, []byte(`{"have":"`+have+`"}`)
	}
	reply := n.serveRemote(context.Background(), req)
	_, pats, err := readCatalog(reply.Payload, have, cached, &testLimits, nil)
	if err != nil || len(pats) != len(cached) {
		b.Fatalf("%d patterns, %v", len(pats), err)
	}
	return len(reply.Payload)
}

// testLimits are the default limits on what other nodes send.
var testLimits = newLimits(&nodeConfig{})

// TestFailedPullOfGossipedDigestRetried: when the pull that a gossiped
// digest change triggers fails (it timed out: a loaded host), the node
// pulls again at the next refresh until one succeeds, and routes the new
// patterns, though discovery announces the change only once. (A mesh of
// 50 nodes on a loaded machine kept a few members' new patterns unrouted
// on some nodes until the next change.)
func TestFailedPullOfGossipedDigestRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newMemNet()
		c, d := memNode(t, net, "c")
		before := []pattern.Pattern{pattern.MustParse("role:a")}
		after := []pattern.Pattern{pattern.MustParse("role:a"), pattern.MustParse("role:b")}
		catalogOf := func(pats []pattern.Pattern) []byte {
			cat := catalog{ID: "x", Digest: digestOf(pats)}
			for _, p := range pats {
				cat.Patterns = append(cat.Patterns, p.String())
			}
			b, err := json.Marshal(cat)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		var mu sync.Mutex
		serving, stall := catalogOf(before), 0 // stall: pulls to leave unanswered
		net.serve("x", serverFunc(func(ctx context.Context, m *Message) *Message {
			mu.Lock()
			b, hang := serving, stall > 0
			if hang {
				stall--
			}
			mu.Unlock()
			if m.Pattern == introspect.CatalogPattern && hang {
				<-ctx.Done() // past the pull's timeout
				return errorReply(ctx.Err())
			}
			return &Message{Codec: CodecJSON, Payload: b}
		}))
		d.host.PeerUp(discovery.Peer{ID: "x", Addr: "x", Digest: digestOf(before)})
		time.Sleep(catalogJitter)
		synctest.Wait()
		if _, ok, _ := c.Route("role:a"); !ok {
			t.Fatal("role:a not routed")
		}

		mu.Lock()
		serving, stall = catalogOf(after), 1
		mu.Unlock()
		d.host.PeerUp(discovery.Peer{ID: "x", Addr: "x", Digest: digestOf(after)}) // announced once
		time.Sleep(c.remote.pullTimeout() - time.Millisecond)
		synctest.Wait()
		if _, ok, _ := c.Route("role:b"); ok {
			t.Fatal("role:b routed while its pull hangs")
		}
		wait := catalogJitter + c.remote.refresh + catalogJitter
		time.Sleep(wait)
		synctest.Wait()
		if _, ok, _ := c.Route("role:b"); !ok {
			t.Fatalf("role:b not routed %v after the pull timed out (refresh every %v)", wait, c.remote.refresh)
		}
	})
}
