package swim

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/memberlist"

	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

// fakeHost is a DiscoveryHost that records what discovery reports.
type fakeHost struct {
	mu     sync.Mutex
	self   discovery.Peer
	events chan string
	log    []string // what await has read from events
}

func newFakeHost(id, addr string) *fakeHost {
	return &fakeHost{self: discovery.Peer{ID: id, Addr: addr, Transport: "tcp", Digest: "d-" + id}, events: make(chan string, 1000)}
}

func (h *fakeHost) Self() discovery.Peer {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.self
}

func (h *fakeHost) setDigest(d string) {
	h.mu.Lock()
	h.self.Digest = d
	h.mu.Unlock()
}

func (h *fakeHost) PeerUp(p discovery.Peer) {
	s := fmt.Sprintf("up %s %s %s %s", p.ID, p.Addr, p.Transport, p.Digest)
	if p.Suspect {
		s += " suspect"
	}
	h.events <- s
}

func (h *fakeHost) PeerDown(p discovery.Peer) { h.events <- fmt.Sprintf("down %s %s", p.ID, p.Addr) }

func (h *fakeHost) drain() []string {
	var out []string
	for {
		select {
		case e := <-h.events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// tableDiscovery is a Discovery for driving the member table directly.
func tableDiscovery(h discovery.Host) *Discovery {
	return &Discovery{name: "self/0", host: h, log: slog.New(slog.DiscardHandler)}
}

func encodeTest(t *testing.T, m meta) []byte {
	t.Helper()
	m.Protocol = protocolVersion
	b, err := encodeMeta(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMemberTable drives the member table with the events memberlist
// would report and checks what the node hears.
func TestMemberTable(t *testing.T) {
	h := newFakeHost("self", "127.0.0.1:1")
	d := tableDiscovery(h)
	ms := &members{byName: map[string]*member{}, owner: map[string]string{}}
	a1 := encodeTest(t, meta{Addr: "10.0.0.1:7000", Transport: "tcp", Digest: "x"})
	a2 := encodeTest(t, meta{Addr: "10.0.0.1:7000", Transport: "tcp", Digest: "y"})
	b := encodeTest(t, meta{Addr: "10.0.0.2:7000", Transport: "tcp", Digest: "x"})
	step := func(name string, f func(), want ...string) {
		t.Helper()
		f()
		if diff := cmp.Diff(want, h.drain()); diff != "" {
			t.Errorf("%s: reports (-want +got):\n%s", name, diff)
		}
	}
	step("join", func() { d.memberUp(ms, "a/1", a1) }, "up a 10.0.0.1:7000 tcp x")
	step("same meta again", func() { d.memberUp(ms, "a/1", a1) })
	step("new digest", func() { d.memberUp(ms, "a/1", a2) }, "up a 10.0.0.1:7000 tcp y")
	step("second member", func() { d.memberUp(ms, "b/1", b) }, "up b 10.0.0.2:7000 tcp x")
	step("suspect", func() { d.applySuspicion(ms, map[string]bool{"a/1": true, "b/1": false}) }, "up a 10.0.0.1:7000 tcp y suspect")
	step("still suspect", func() { d.applySuspicion(ms, map[string]bool{"a/1": true, "b/1": false}) })
	step("alive again", func() { d.applySuspicion(ms, map[string]bool{"a/1": false, "b/1": false}) }, "up a 10.0.0.1:7000 tcp y")
	step("suspect again", func() { d.applySuspicion(ms, map[string]bool{"a/1": true}) }, "up a 10.0.0.1:7000 tcp y suspect")
	// a restarts on its address before its first run is declared dead.
	step("restart on the same address", func() { d.memberUp(ms, "a/2", a1) }, "up a 10.0.0.1:7000 tcp x")
	step("the old run's suspicion is not reported", func() { d.applySuspicion(ms, map[string]bool{"a/1": true, "a/2": false}) })
	step("the old run's death is not reported", func() { d.memberLeft(ms, "a/1") })
	step("leave", func() { d.memberLeft(ms, "a/2") }, "down a 10.0.0.1:7000")
	step("leave twice", func() { d.memberLeft(ms, "a/2") })
	step("malformed meta: ignored", func() { d.memberUp(ms, "c/1", []byte{1, 1, 200}) })
	step("malformed update of a member: it goes", func() { d.memberUp(ms, "b/1", []byte{7}) }, "down b 10.0.0.2:7000")
	step("another segment", func() { d.memberUp(ms, "e/1", encodeTest(t, meta{Addr: "10.0.0.5:1", Segment: "other"})) })
	step("not a wizard name", func() { d.memberUp(ms, "plain", b) })
	step("a member that serves nothing", func() { d.memberUp(ms, "g/1", encodeTest(t, meta{Transport: "tcp", Digest: "x"})) })
	step("another protocol", func() {
		bad, _ := encodeMeta(meta{Protocol: protocolVersion + 1, Addr: "10.0.0.6:1"})
		d.memberUp(ms, "f/1", bad)
	})
}

// TestMemberTableRestartOwnership: when the owner of an address dies, a
// member still using the address becomes its owner.
func TestMemberTableRestartOwnership(t *testing.T) {
	h := newFakeHost("self", "127.0.0.1:1")
	d := tableDiscovery(h)
	ms := &members{byName: map[string]*member{}, owner: map[string]string{}}
	a := encodeTest(t, meta{Addr: "10.0.0.1:7000", Digest: "x"})
	d.memberUp(ms, "a/1", a)
	d.memberUp(ms, "a/2", a)
	d.memberLeft(ms, "a/2")
	want := []string{"up a 10.0.0.1:7000  x", "up a 10.0.0.1:7000  x", "up a 10.0.0.1:7000  x"}
	if diff := cmp.Diff(want, h.drain()); diff != "" {
		t.Errorf("reports (-want +got):\n%s", diff)
	}
	if got := ms.owner["10.0.0.1:7000"]; got != "a/1" {
		t.Errorf("owner = %q, want a/1", got)
	}
}

func TestSplitName(t *testing.T) {
	tests := []struct {
		name, id, boot string
		ok             bool
	}{
		{"n1/abc", "n1", "abc", true},
		{"svc/eu/1/abc", "svc/eu/1", "abc", true},
		{"plain", "", "", false},
		{"/abc", "", "", false},
		{"n1/", "", "", false},
	}
	for _, tt := range tests {
		id, boot, ok := splitName(tt.name)
		if id != tt.id || boot != tt.boot || ok != tt.ok {
			t.Errorf("splitName(%q) = %q, %q, %v", tt.name, id, boot, ok)
		}
	}
}

// TestStateReader checks that memberlist's internals are where
// stateReader looks for them.
func TestStateReader(t *testing.T) {
	leak.Check(t)
	d := mustNew(t, WithBindAddr("127.0.0.1:0"), WithPreset(Fast))
	if err := d.Start(newFakeHost("states", "127.0.0.1:1")); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r, err := newStateReader(d.ml)
	if err != nil {
		t.Fatalf("suspicion cannot be read: %v", err)
	}
	if diff := cmp.Diff(map[string]bool{d.name: false}, r.read()); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
}

// gossipNode starts a Discovery on loopback for a fake host.
func gossipNode(t *testing.T, id string, opts ...Option) (*Discovery, *fakeHost) {
	t.Helper()
	h := newFakeHost(id, "127.0.0.1:"+fmt.Sprint(10000+int(id[0]))) // never dialled
	d := mustNew(t, append([]Option{WithBindAddr("127.0.0.1:0"), WithPreset(Fast)}, opts...)...)
	if err := d.Start(h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, h
}

// await waits until h's reports include one satisfying ok, whatever
// came before or in between, failing after the guard; it returns the
// reports so far.
func await(t *testing.T, h *fakeHost, what string, ok func(string) bool) []string {
	t.Helper()
	deadline := time.NewTimer(testwait.Guard)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		for len(h.events) > 0 {
			h.log = append(h.log, <-h.events)
		}
		log := slices.Clone(h.log)
		h.mu.Unlock()
		if slices.ContainsFunc(log, ok) {
			return log
		}
		select {
		case e := <-h.events:
			h.mu.Lock()
			h.log = append(h.log, e)
			h.mu.Unlock()
		case <-deadline.C:
			t.Fatalf("no report of %s after %v; reports:\n%s", what, testwait.Guard, strings.Join(log, "\n"))
		}
	}
}

func is(want string) func(string) bool { return func(s string) bool { return s == want } }

// TestGossipReports runs three members with fake hosts on real sockets: a
// join is reported with the member's meta, a changed digest is
// re-announced, and a member that stops gossiping without leaving is
// reported suspect, then down.
func TestGossipReports(t *testing.T) {
	leak.Check(t)
	a, ha := gossipNode(t, "a")
	b, hb := gossipNode(t, "b", WithSeeds(a.GossipAddr()))
	c, hc := gossipNode(t, "c", WithSeeds(a.GossipAddr()))
	upB := fmt.Sprintf("up b %s tcp d-b", hb.Self().Addr)
	upC := fmt.Sprintf("up c %s tcp d-c", hc.Self().Addr)
	await(t, ha, upB, is(upB))
	await(t, ha, upC, is(upC))
	await(t, hb, upC, is(upC))

	hb.setDigest("d-b2")
	b.SelfChanged()
	b.SelfChanged() // coalesces
	upB2 := fmt.Sprintf("up b %s tcp d-b2", hb.Self().Addr)
	await(t, ha, upB2, is(upB2))
	await(t, hc, upB2, is(upB2))

	c.Crash()
	suspect := upC + " suspect"
	down := fmt.Sprintf("down c %s", hc.Self().Addr)
	// Each watcher reads member states once per probe interval; at least
	// one of them sees the suspicion, which lasts a suspicion timeout.
	var logs []string
	suspected := false
	for _, h := range []*fakeHost{ha, hb} {
		log := await(t, h, down, is(down))
		suspected = suspected || slices.Contains(log[:slices.Index(log, down)], suspect)
		logs = append(logs, strings.Join(log, "\n"))
	}
	if !suspected {
		t.Errorf("no suspect report before %q:\n%s", down, strings.Join(logs, "\n--\n"))
	}
}

// TestGossipLeave: a member that closes is reported down at once, without
// suspicion.
func TestGossipLeave(t *testing.T) {
	leak.Check(t)
	a, ha := gossipNode(t, "a")
	b, hb := gossipNode(t, "b", WithSeeds(a.GossipAddr()))
	upB := fmt.Sprintf("up b %s tcp d-b", hb.Self().Addr)
	await(t, ha, upB, is(upB))
	b.Close()
	down := fmt.Sprintf("down b %s", hb.Self().Addr)
	if log := await(t, ha, down, is(down)); slices.Contains(log, upB+" suspect") {
		t.Errorf("a leaving member was suspected:\n%s", strings.Join(log, "\n"))
	}
}

// badMeta is a memberlist delegate that gossips meta of its own making.
type badMeta []byte

func (b badMeta) NodeMeta(int) []byte                  { return b }
func (badMeta) NotifyMsg([]byte)                       {}
func (badMeta) GetBroadcasts(int, int) [][]byte        { return nil }
func (badMeta) LocalState(bool) []byte                 { return nil }
func (badMeta) MergeRemoteState(buf []byte, join bool) {}

// TestMalformedMember: plain memberlist nodes gossiping malformed or
// foreign meta try to join: the Discovery logs them and never reports or
// keeps them.
func TestMalformedMember(t *testing.T) {
	leak.Check(t)
	var logs testlog.Buffer
	d := mustNew(t, WithBindAddr("127.0.0.1:0"), WithPreset(Fast), WithLogger(logs.Logger()))
	h := newFakeHost("good", "127.0.0.1:1")
	if err := d.Start(h); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	other, _ := encodeMeta(meta{Protocol: protocolVersion, Addr: "127.0.0.1:2", Segment: "elsewhere"})
	for name, m := range map[string][]byte{
		"garbage/1":       {9, 9, 9},
		"truncated/1":     {1, 1, 40, 'x'},
		"other-segment/1": other,
		"not-wizard":      mustMeta(t, meta{Protocol: protocolVersion, Addr: "127.0.0.1:3"}),
	} {
		c := memberlist.DefaultLocalConfig()
		c.Name, c.BindAddr, c.BindPort, c.AdvertisePort = name, "127.0.0.1", 0, 0
		c.Delegate = badMeta(m)
		c.LogOutput = io.Discard
		ml, err := memberlist.Create(c)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = ml.Join([]string{d.GossipAddr()}) // the push/pull goes through; the member does not
		testwait.Until(t, name+" not logged", func() bool { return strings.Contains(logs.String(), "ignoring alive message for '"+name+"'") })
		ml.Shutdown()
	}
	if n := d.ml.NumMembers(); n != 1 {
		t.Errorf("%d members, want only itself", n)
	}
	if got := h.drain(); len(got) != 0 {
		t.Errorf("reports: %q", got)
	}
}

func mustMeta(t *testing.T, m meta) []byte {
	t.Helper()
	b, err := encodeMeta(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
