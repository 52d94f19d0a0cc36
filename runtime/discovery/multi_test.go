package discovery

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeDiscovery keeps the host it is started with.
type fakeDiscovery struct {
	host     Host
	startErr error
	closed   int
	changed  int
}

func (f *fakeDiscovery) Start(h Host) error {
	if f.startErr != nil {
		return f.startErr
	}
	f.host = h
	return nil
}

func (f *fakeDiscovery) Close() error { f.closed++; return nil }

func (f *fakeDiscovery) SelfChanged() { f.changed++ }

// quietDiscovery announces nothing (no SelfChanged).
type quietDiscovery struct{ host Host }

func (q *quietDiscovery) Start(h Host) error { q.host = h; return nil }
func (q *quietDiscovery) Close() error       { return nil }

// recordingHost records what a discovery reports.
type recordingHost struct {
	mu     sync.Mutex
	events []string
}

func (h *recordingHost) Self() Peer { return Peer{ID: "self"} }

func (h *recordingHost) PeerUp(p Peer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := "up " + p.Addr + " id=" + p.ID + " digest=" + p.Digest
	if p.Suspect {
		s += " suspect"
	}
	h.events = append(h.events, s)
}

func (h *recordingHost) PeerDown(p Peer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, "down "+p.Addr)
}

func (h *recordingHost) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	ev := h.events
	h.events = nil
	return ev
}

// TestMulti: the node sees the union of what its discoveries
// report: a peer is up while one reports it, its fields merged, suspect
// only when every one suspects it, down once every one that reported it
// said it left; unchanged reports are not forwarded; SelfChanged reaches
// the discoveries that announce the node; Close closes them all.
func TestMulti(t *testing.T) {
	a, b := &fakeDiscovery{}, &quietDiscovery{}
	d, err := Multi(a, b)
	if err != nil {
		t.Fatal(err)
	}
	h := &recordingHost{}
	if err := d.Start(h); err != nil {
		t.Fatal(err)
	}
	if got := a.host.Self().ID; got != "self" {
		t.Errorf("Self().ID = %q through Multi, want self", got)
	}
	steps := []struct {
		name string
		do   func()
		want []string
	}{
		{"a reports x", func() { a.host.PeerUp(Peer{Addr: "x", ID: "n1", Digest: "d1"}) }, []string{"up x id=n1 digest=d1"}},
		{"b reports x without a digest: nothing new", func() { b.host.PeerUp(Peer{Addr: "x"}) }, nil},
		{"a again: nothing new", func() { a.host.PeerUp(Peer{Addr: "x", ID: "n1", Digest: "d1"}) }, nil},
		{"b suspects x, a does not", func() { b.host.PeerUp(Peer{Addr: "x", Suspect: true}) }, nil},
		{"a suspects x too", func() { a.host.PeerUp(Peer{Addr: "x", ID: "n1", Digest: "d1", Suspect: true}) }, []string{"up x id=n1 digest=d1 suspect"}},
		{"a: x's digest changed", func() { a.host.PeerUp(Peer{Addr: "x", ID: "n1", Digest: "d2"}) }, []string{"up x id=n1 digest=d2"}},
		{"a says x left, b still reports it", func() { a.host.PeerDown(Peer{Addr: "x"}) }, []string{"up x id= digest= suspect"}},
		{"b says x left", func() { b.host.PeerDown(Peer{Addr: "x"}) }, []string{"down x"}},
		{"b reports y, then says it left", func() { b.host.PeerUp(Peer{Addr: "y"}); b.host.PeerDown(Peer{Addr: "y"}) }, []string{"up y id= digest=", "down y"}},
		{"a says z left, never reported", func() { a.host.PeerDown(Peer{Addr: "z"}) }, []string{"down z"}},
		{"a reports an empty address: dropped", func() { a.host.PeerUp(Peer{}) }, nil},
	}
	for _, s := range steps {
		s.do()
		if diff := cmp.Diff(s.want, h.take()); diff != "" {
			t.Errorf("%s: forwarded (-want +got):\n%s", s.name, diff)
		}
	}
	d.(SelfAnnouncer).SelfChanged()
	if a.changed != 1 {
		t.Errorf("SelfChanged reached a %d times, want 1", a.changed)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if a.closed != 1 {
		t.Errorf("a closed %d times, want 1", a.closed)
	}
}

// TestMultiErrors: Multi refuses no discovery and a nil
// one, naming it; a Start that fails closes those started and names the
// one that failed.
func TestMultiErrors(t *testing.T) {
	if _, err := Multi(); err == nil || !strings.Contains(err.Error(), "wizard: discovery.Multi: no discovery given") {
		t.Errorf("Multi(): %v", err)
	}
	if _, err := Multi(&fakeDiscovery{}, nil); err == nil || !strings.Contains(err.Error(), "discovery 2 of 2 is nil") {
		t.Errorf("Multi(d, nil): %v", err)
	}
	first, boom := &fakeDiscovery{}, errors.New("boom")
	d, err := Multi(first, &fakeDiscovery{startErr: boom})
	if err != nil {
		t.Fatal(err)
	}
	err = d.Start(&recordingHost{})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "wizard: discovery.Multi: discovery 2 of 2: boom") {
		t.Errorf("Start: %v; want discovery 2's error, named", err)
	}
	if first.closed != 1 {
		t.Errorf("the discovery started before closed %d times, want 1", first.closed)
	}
}
