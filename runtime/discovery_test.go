package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/introspect"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// memNet is a message-level transport in memory: a node listening on an
// address serves the calls of nodes dialling it, in the caller's
// goroutine; closing a listener drops its connections. It counts dials
// and catalog pulls per address.
type memNet struct {
	name string

	mu       sync.Mutex
	servers  map[string]Server
	conns    map[string][]*memConn // by the address dialled
	catalogs map[string]int        // catalogs answered in full
	confirms map[string]int        // catalog pulls answered by a confirmation of the digest asked
	calls    map[string]int
	dials    map[string]int  // dials that connected
	attempts map[string]int  // every dial, connected or not
	lose     map[string]bool // calls (not catalogs) to these addresses are lost after they ran
	stall    map[string]int  // calls to these addresses (this many more) are given up after they ran, as on a stalled connection
}

func newMemNet() *memNet {
	return &memNet{name: "mem", servers: map[string]Server{}, conns: map[string][]*memConn{}, catalogs: map[string]int{}, confirms: map[string]int{},
		calls: map[string]int{}, dials: map[string]int{}, attempts: map[string]int{}}
}

func (t *memNet) Name() string { return t.name }

// serve makes s answer on addr, without a listener.
func (t *memNet) serve(addr string, s Server) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.servers[addr] = s
}

func (t *memNet) Listen(addr string, s Server) (Listener, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.servers[addr] != nil {
		return nil, fmt.Errorf("%s in use", addr)
	}
	t.servers[addr] = s
	return &memListener{t: t, addr: addr}, nil
}

func (t *memNet) Dial(ctx context.Context, addr string) (Conn, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.attempts[addr]++
	s := t.servers[addr]
	if s == nil {
		return nil, fmt.Errorf("%w: nothing listens on %s", ErrNotSent, addr)
	}
	t.dials[addr]++
	c := &memConn{t: t, addr: addr, s: s, done: make(chan struct{})}
	t.conns[addr] = append(t.conns[addr], c)
	return c, nil
}

func (t *memNet) count(m map[string]int, addr string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return m[addr]
}

type memListener struct {
	t    *memNet
	addr string
}

func (l *memListener) Addr() string { return l.addr }
func (l *memListener) Close() error {
	l.t.mu.Lock()
	conns := l.t.conns[l.addr]
	delete(l.t.servers, l.addr)
	delete(l.t.conns, l.addr)
	l.t.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	return nil
}
func (l *memListener) Shutdown(context.Context) error { return l.Close() }

type memConn struct {
	t    *memNet
	addr string
	s    Server
	done chan struct{}
	once sync.Once
}

func (c *memConn) Call(ctx context.Context, m *Message) (*Message, error) {
	c.t.mu.Lock()
	if m.Pattern != introspect.CatalogPattern {
		c.t.calls[c.addr]++
	}
	lose := c.t.lose[c.addr] && m.Pattern != introspect.CatalogPattern
	stall := c.t.stall[c.addr] > 0 && m.Pattern != introspect.CatalogPattern
	if stall {
		c.t.stall[c.addr]--
	}
	c.t.mu.Unlock()
	in := *m // the server owns what it receives (and may reuse it for the reply)
	in.Meta = slices.Clone(m.Meta)
	reply := c.s.ServeMessage(ctx, &in)
	if m.Pattern == introspect.CatalogPattern {
		c.t.mu.Lock()
		if reply != nil && bytes.Contains(reply.Payload, []byte(`"have"`)) {
			c.t.confirms[c.addr]++
		} else {
			c.t.catalogs[c.addr]++
		}
		c.t.mu.Unlock()
	}
	if lose {
		return nil, errLost
	}
	if stall {
		return nil, stalledError{}
	}
	if m.Flags&FlagNoReply != 0 {
		return nil, nil
	}
	return reply, nil
}

func (c *memConn) Done() <-chan struct{} { return c.done }
func (c *memConn) Close() error          { c.once.Do(func() { close(c.done) }); return nil }

// hostDiscovery hands the test the node's DiscoveryHost and counts the
// SelfChanged calls.
type hostDiscovery struct {
	host    discovery.Host
	changed atomic.Int32
}

func (d *hostDiscovery) Start(h discovery.Host) error { d.host = h; return nil }
func (d *hostDiscovery) Close() error                 { return nil }
func (d *hostDiscovery) SelfChanged()                 { d.changed.Add(1) }

// memNode starts a node listening on addr in net, serving patterns.
func memNode(t *testing.T, net *memNet, addr string, patterns ...string) (*Node, *hostDiscovery) {
	t.Helper()
	d := &hostDiscovery{}
	n, err := New(WithID(addr), WithTransport(net), WithListen(addr), WithDiscovery(d))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	for _, p := range patterns {
		if err := n.Add(p, func(ctx context.Context, r Request) (any, error) { return addr, nil }); err != nil {
			t.Fatal(err)
		}
	}
	return n, d
}

// waitRoute waits until n routes pattern to exactly want (peer ids).
func waitRoute(t *testing.T, n *Node, pattern string, want ...string) {
	t.Helper()
	slices.Sort(want)
	var got []string
	defer func() {
		if t.Failed() {
			t.Logf("%s last routed %q to %v", n.ID(), pattern, got)
		}
	}()
	testwait.Until(t, fmt.Sprintf("%s routes %q to %v", n.ID(), pattern, want), func() bool {
		got = nil
		for _, pi := range n.Patterns() {
			if pi.Pattern.String() == pattern {
				got = pi.Remote
			}
		}
		return slices.Equal(got, want)
	})
}

func TestDigest(t *testing.T) {
	a := []pattern.Pattern{pattern.MustParse("b:2,a:1"), pattern.MustParse("c:3")}
	b := []pattern.Pattern{pattern.MustParse("c:3"), pattern.MustParse("a:1,b:2"), pattern.MustParse("c:3")}
	if digestOf(a) != digestOf(b) {
		t.Errorf("order or duplicates change the digest: %s vs %s", digestOf(a), digestOf(b))
	}
	if d := digestOf(a); len(d) != 22 {
		t.Errorf("digest %q: want 22 characters", d)
	}
	if digestOf(a) == digestOf(a[:1]) || digestOf(nil) == digestOf(a[:1]) {
		t.Error("different sets share a digest")
	}

	net := newMemNet()
	n, d := memNode(t, net, "a")
	self := d.host.Self()
	if self.Digest != digestOf(nil) || self.Transport != "mem" || self.ID != "a" || self.Addr != "a" {
		t.Errorf("Self() = %+v", self)
	}
	if err := n.Add("role:x", func(context.Context, Request) (any, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if got, want := d.host.Self().Digest, digestOf([]pattern.Pattern{pattern.MustParse("role:x")}); got != want {
		t.Errorf("after Add: digest %s, want %s", got, want)
	}
	if got := d.changed.Load(); got != 1 {
		t.Errorf("SelfChanged called %d times after one Add, want 1", got)
	}
	if ok, err := n.Remove("role:x"); !ok || err != nil {
		t.Fatalf("Remove: %v %v", ok, err)
	}
	if d.host.Self().Digest != digestOf(nil) || d.changed.Load() != 2 {
		t.Errorf("after Remove: digest %s, %d SelfChanged calls", d.host.Self().Digest, d.changed.Load())
	}
}

// TestCatalogCacheByDigest: a node fetches a catalog in full once per
// digest; a second peer with the same digest is routed from the cache once
// its own pull confirms the digest, and a new digest is fetched.
func TestCatalogCacheByDigest(t *testing.T) {
	net := newMemNet()
	s1, _ := memNode(t, net, "s1", "role:math,cmd:sum")
	s2, _ := memNode(t, net, "s2", "role:math,cmd:sum")
	c, d := memNode(t, net, "c")
	h := d.host
	h.PeerUp(discovery.Peer{ID: "s1", Addr: "s1", Digest: s1.digest()})
	waitRoute(t, c, "cmd:sum,role:math", "s1")
	h.PeerUp(discovery.Peer{ID: "s2", Addr: "s2", Digest: s2.digest()})
	waitRoute(t, c, "cmd:sum,role:math", "s1", "s2")
	if got := net.count(net.catalogs, "s2"); got != 0 {
		t.Errorf("s2's catalog fetched %d times; its digest was cached", got)
	}
	if got := net.count(net.confirms, "s2"); got != 1 {
		t.Errorf("s2 confirmed its digest %d times, want once", got)
	}
	// The same digest again (a suspicion cleared, say): nothing fetched.
	h.PeerUp(discovery.Peer{ID: "s1", Addr: "s1", Digest: s1.digest()})
	// s1 changes: its new digest is fetched.
	if err := s1.Add("role:math,cmd:mul", func(context.Context, Request) (any, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	h.PeerUp(discovery.Peer{ID: "s1", Addr: "s1", Digest: s1.digest()})
	waitRoute(t, c, "cmd:mul,role:math", "s1")
	if got := net.count(net.catalogs, "s1"); got != 2 {
		t.Errorf("s1's catalog fetched %d times, want 2 (two digests)", got)
	}
	if got := net.count(net.catalogs, "s2"); got != 0 {
		t.Errorf("s2's catalog fetched %d times, want 0", got)
	}
}

// TestSuspectPeer: a suspect peer gets no calls while another serves the
// pattern, and gets them again when it is the only one.
func TestSuspectPeer(t *testing.T) {
	net := newMemNet()
	s1, _ := memNode(t, net, "s1", "role:r")
	s2, _ := memNode(t, net, "s2", "role:r")
	c, d := memNode(t, net, "c")
	d.host.PeerUp(discovery.Peer{ID: "s1", Addr: "s1", Digest: s1.digest()})
	d.host.PeerUp(discovery.Peer{ID: "s2", Addr: "s2", Digest: s2.digest()})
	waitRoute(t, c, "role:r", "s1", "s2")
	d.host.PeerUp(discovery.Peer{ID: "s1", Addr: "s1", Digest: s1.digest(), Suspect: true})
	before := net.count(net.calls, "s1")
	for range 10 {
		res, err := c.ActE(t.Context(), "role:r", nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Value(); got != "s2" {
			t.Fatalf("answered by %v while s1 is suspect", got)
		}
	}
	if got := net.count(net.calls, "s1"); got != before {
		t.Errorf("the suspect peer got %d calls", got-before)
	}
	if ms := c.Members(); !ms[1].Suspect || ms[2].Suspect {
		t.Errorf("Members() = %+v: want s1 suspect, s2 not", ms)
	}
	d.host.PeerDown(discovery.Peer{ID: "s2", Addr: "s2"})
	waitRoute(t, c, "role:r", "s1")
	res, err := c.ActE(t.Context(), "role:r", nil)
	if err != nil || res.Value() != "s1" {
		t.Errorf("the only peer, suspect: %v, %v; want its answer", res.Value(), err)
	}
}

// TestPeerDownOfAnEarlierRun: a node restarts on its address, and
// discovery reports its new run before the death of the first; the death
// notice for the earlier run does not remove the run answering there now.
func TestPeerDownOfAnEarlierRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newMemNet()
		s1, _ := memNode(t, net, "s", "role:r")
		c, d := memNode(t, net, "c")
		run1 := discovery.Peer{ID: "s", Instance: s1.instance, Addr: "s", Digest: s1.digest()}
		d.host.PeerUp(run1)
		time.Sleep(catalogJitter)
		synctest.Wait()
		waitRoute(t, c, "role:r", "s")
		if err := s1.Close(); err != nil {
			t.Fatal(err)
		}
		s2, _ := memNode(t, net, "s", "role:r")
		run2 := discovery.Peer{ID: "s", Instance: s2.instance, Addr: "s", Digest: s2.digest()}
		d.host.PeerUp(run2)
		time.Sleep(maxDialBackoff) // reconnected
		synctest.Wait()
		d.host.PeerDown(run1)
		if _, err := c.ActE(t.Context(), "role:r", nil); err != nil {
			t.Errorf("after the earlier run's death notice: %v", err)
		}
		d.host.PeerDown(run2)
		if got := routedTo(c, "role:r"); len(got) != 0 {
			t.Errorf("after the current run's death notice, role:r routed to %v", got)
		}
		time.Sleep(downGrace + time.Millisecond)
		synctest.Wait()
		if _, err := c.ActE(t.Context(), "role:r", nil); !errors.Is(err, ErrNotFound) {
			t.Errorf("after the current run's death notice and the grace: %v, want ErrNotFound", err)
		}
	})
}

// routedTo lists the peers n's Patterns give for pattern.
func routedTo(n *Node, pattern string) []string {
	for _, pi := range n.Patterns() {
		if pi.Pattern.String() == pattern {
			return pi.Remote
		}
	}
	return nil
}

// TestPeerOnAnotherTransportIgnored: a peer on another transport is not
// called, but listed as such until discovery reports it down.
func TestPeerOnAnotherTransportIgnored(t *testing.T) {
	net := newMemNet()
	_, _ = memNode(t, net, "s", "role:r")
	c, d := memNode(t, net, "c")
	d.host.PeerUp(discovery.Peer{Addr: "s", Transport: "quic"})
	want := []introspect.Member{
		{ID: "c", Addr: "c", Digest: c.digest(), Self: true, Connected: true, Transport: "mem"},
		{Addr: "s", Transport: "quic", LastError: "on transport quic; this node speaks mem"},
	}
	if diff := cmp.Diff(want, c.Members()); diff != "" {
		t.Errorf("Members() mismatch (-want +got):\n%s", diff)
	}
	if _, err := c.ActE(t.Context(), "role:r", nil); CodeOf(err) != CodeUnavailable || !strings.Contains(err.Error(), "s (on transport quic") {
		t.Errorf("a call only the peer on another transport may serve: %v, want unavailable naming it", err)
	}
	d.host.PeerDown(discovery.Peer{Addr: "s", Transport: "quic"})
	if ms := c.Members(); len(ms) != 1 {
		t.Errorf("Members() = %+v after the peer's death notice", ms)
	}
	if _, err := c.ActE(t.Context(), "role:r", nil); CodeOf(err) != CodeNotFound {
		t.Errorf("once it is gone: %v, want not_found", err)
	}
}

func TestMembersAndPatterns(t *testing.T) {
	net := newMemNet()
	s, _ := memNode(t, net, "s", "role:r", "role:only-s")
	c, d := memNode(t, net, "c", "role:r", "role:only-c")
	d.host.PeerUp(discovery.Peer{Addr: "s", Digest: s.digest()}) // no id: learnt from the catalog
	waitRoute(t, c, "role:only-s", "s")
	want := []introspect.PatternInfo{
		{Pattern: pattern.MustParse("role:only-c"), Local: true},
		{Pattern: pattern.MustParse("role:only-s"), Remote: []string{"s"}},
		{Pattern: pattern.MustParse("role:r"), Local: true, Remote: []string{"s"}},
	}
	if diff := cmp.Diff(want, c.Patterns(), cmp.Comparer(pattern.Pattern.Equal)); diff != "" {
		t.Errorf("Patterns() mismatch (-want +got):\n%s", diff)
	}
	ms := c.Members()
	wantMembers := []introspect.Member{
		{ID: "c", Addr: "c", Digest: c.digest(), Self: true, Connected: true, Transport: "mem", Patterns: 2},
		{ID: "s", Addr: "s", Digest: s.digest(), Connected: true, Transport: "mem", Patterns: 2},
	}
	if diff := cmp.Diff(wantMembers, ms); diff != "" {
		t.Errorf("Members() mismatch (-want +got):\n%s", diff)
	}
}

func TestDecodeCatalog(t *testing.T) {
	pats := []pattern.Pattern{pattern.MustParse("role:a"), pattern.MustParse("role:b")}
	good, _ := json.Marshal(catalog{ID: "x", Digest: digestOf(pats), Patterns: []string{"role:a", "role:b", "role:a"}})
	lim := newLimits(&nodeConfig{})
	c, got, err := decodeCatalog(good, &lim)
	if err != nil || c.ID != "x" || len(got) != 2 {
		t.Errorf("decodeCatalog(good) = %+v, %v, %v", c, got, err)
	}
	many := catalog{Patterns: make([]string, maxCatalogPatterns+1)}
	for i := range many.Patterns {
		many.Patterns[i] = "a:1"
	}
	tooMany, _ := json.Marshal(many)
	keys := make([]string, defaultMaxPatternKeys+1)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d:1", i)
	}
	for name, b := range map[string][]byte{
		"not json":         []byte("{"),
		"not an object":    []byte("[]"),
		"bad pattern":      []byte(`{"id":"x","patterns":["role:a","a:b:c,,"]}`),
		"wrong type":       []byte(`{"id":"x","patterns":"role:a"}`),
		"digest mismatch":  []byte(`{"id":"x","digest":"AAAAAAAAAAAAAAAAAAAAAA","patterns":["role:a"]}`),
		"too many":         tooMany,
		"pattern too long": []byte(`{"id":"x","patterns":["role:a","a:` + strings.Repeat("x", defaultMaxPatternBytes) + `"]}`),
		"too many keys":    []byte(`{"id":"x","patterns":["role:a","` + strings.Join(keys, ",") + `"]}`),
	} {
		if _, _, err := decodeCatalog(b, &lim); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestBadCatalogLogged: a peer that answers a malformed catalog is not
// routed, and the node says why.
func TestBadCatalogLogged(t *testing.T) {
	var logs testlog.Buffer
	net := newMemNet()
	net.servers["bad"] = serverFunc(func(ctx context.Context, m *Message) *Message {
		return &Message{Codec: CodecJSON, Payload: []byte(`{"patterns":["role:a,,"]}`)}
	})
	c, d := memNode(t, net, "c")
	c.log = logs.Logger()
	d.host.PeerUp(discovery.Peer{Addr: "bad"})
	testwait.Until(t, "a log line for the bad catalog", func() bool { return strings.Contains(logs.String(), "catalog rejected") })
	if ps := c.Patterns(); len(ps) != 0 {
		t.Errorf("Patterns() = %v after a bad catalog", ps)
	}
}

func FuzzDecodeCatalog(f *testing.F) {
	f.Add([]byte(`{"id":"x","patterns":["role:a","cmd:b,role:a"]}`))
	f.Add([]byte(`{"id":"x","digest":"` + digestOf([]pattern.Pattern{pattern.MustParse("role:a")}) + `","patterns":["role:a"]}`))
	f.Add([]byte(`{"patterns":["a:*","b:1.5e3"]}`))
	lim := newLimits(&nodeConfig{})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, pats, err := decodeCatalog(b, &lim)
		if err != nil {
			return
		}
		if c.Digest != "" && c.Digest != digestOf(pats) {
			t.Errorf("accepted digest %q for patterns %v", c.Digest, pats)
		}
		for i, p := range pats {
			q, err := pattern.Parse(p.String())
			if err != nil || !q.Equal(p) {
				t.Errorf("pattern %d %q does not round-trip: %v", i, p.String(), err)
			}
			for _, o := range pats[:i] {
				if o.Equal(p) {
					t.Errorf("duplicate pattern %q accepted", p.String())
				}
			}
		}
	})
}

var errLost = errors.New("mem: connection lost after the call was sent")

// stalledError is a transport's error for an idempotent call given up on
// a stalled connection that stays (as runtime/tcp's over mux.ErrStalled).
type stalledError struct{}

func (stalledError) Error() string {
	return "mem: call given up after it was sent, the connection kept"
}
func (stalledError) Stalled() bool { return true }

type serverFunc func(ctx context.Context, m *Message) *Message

func (f serverFunc) ServeMessage(ctx context.Context, m *Message) *Message { return f(ctx, m) }

// TestPeerBackFromTheDead: a peer reported down gets no calls at once
// while another serves its patterns, and is a last resort over the
// connection it has (a stale death notice must not make a pattern nobody's
// while its server answers); reported up again within downGrace (a death
// refuted), it is routed again over that connection; after downGrace it
// is forgotten.
func TestPeerBackFromTheDead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newMemNet()
		s, _ := memNode(t, net, "s", "role:r")
		memNode(t, net, "o", "role:r")
		c, d := memNode(t, net, "c")
		up := discovery.Peer{ID: "s", Instance: s.instance, Addr: "s", Digest: s.digest()}
		d.host.PeerUp(up)
		d.host.PeerUp(discovery.Peer{Addr: "o"})
		time.Sleep(catalogJitter)
		synctest.Wait()
		if _, err := c.ActE(t.Context(), "role:r", nil); err != nil {
			t.Fatalf("before: %v", err)
		}
		d.host.PeerDown(up)
		for range 20 {
			if res, err := c.ActE(t.Context(), "role:r", nil); err != nil || res.Value() != "o" {
				t.Fatalf("s reported down: %v, %v; want o's answer", res.Value(), err)
			}
		}
		if got := routedTo(c, "role:r"); !slices.Equal(got, []string{"o"}) {
			t.Errorf("s reported down: role:r routed to %v, want [o]", got)
		}
		if ms := c.Members(); len(ms) != 2 {
			t.Errorf("Members() = %+v with the peer down", ms)
		}
		d.host.PeerDown(discovery.Peer{Addr: "o"})
		if res, err := c.ActE(t.Context(), "role:r", nil); err != nil {
			t.Errorf("both reported down, s's connection alive: %v, %v; want an answer", res.Value(), err)
		}
		d.host.PeerUp(discovery.Peer{Addr: "o"})
		d.host.PeerUp(up)
		synctest.Wait()
		if _, err := c.ActE(t.Context(), "role:r", nil); err != nil {
			t.Errorf("back up: %v", err)
		}
		if got := net.count(net.dials, "s"); got != 1 {
			t.Errorf("%d dials: the connection was not kept", got)
		}
		d.host.PeerDown(up)
		time.Sleep(downGrace + time.Millisecond)
		synctest.Wait()
		d.host.PeerUp(up) // a new peer now: a new connection
		time.Sleep(catalogJitter)
		synctest.Wait()
		if _, err := c.ActE(t.Context(), "role:r", nil); err != nil {
			t.Errorf("up after the grace: %v", err)
		}
		if got := net.count(net.dials, "s"); got != 2 {
			t.Errorf("%d dials, want a second one after the grace", got)
		}
	})
}
