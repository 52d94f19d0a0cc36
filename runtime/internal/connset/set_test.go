package connset

import (
	"errors"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

var (
	ipA = netip.MustParseAddr("10.0.0.1")
	ipB = netip.MustParseAddr("10.0.0.2")
)

// events records what the set did to the connections of a test.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) record(s string) {
	e.mu.Lock()
	e.got = append(e.got, s)
	e.mu.Unlock()
}

// add adds a connection named name from ip to s, failing t on an error.
func (e *events) add(t *testing.T, s *Set, name string, ip netip.Addr) *Conn {
	t.Helper()
	c, err := e.try(s, name, ip)
	if err != nil {
		t.Fatalf("Add(%s): %v", name, err)
	}
	return c
}

func (e *events) try(s *Set, name string, ip netip.Addr) (*Conn, error) {
	return s.Add(ip,
		func(why error) { e.record("evict " + name + ": " + why.Error()) },
		func() { e.record("go away " + name) })
}

func (e *events) check(t *testing.T, want ...string) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if diff := cmp.Diff(want, e.got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	e.got = nil
}

// TestFull: at the maximum a newcomer takes the place of the connection
// idle longest; busy ones, and ones active since the set last looked, are
// passed over; when all are busy the newcomer is refused.
func TestFull(t *testing.T) {
	var e events
	s := New(Limits{Max: 3, MaxPerIP: 10})
	defer s.Close()
	c1 := e.add(t, s, "c1", ipA)
	c2 := e.add(t, s, "c2", ipA)
	c3 := e.add(t, s, "c3", ipA)
	c1.Begin() // busy
	c2.Begin() // active since the set looked, idle now
	c2.End()
	e.add(t, s, "c4", ipA)
	e.check(t, "evict c3: "+ErrFull.Error())
	if s.Len() != 3 {
		t.Errorf("Len = %d, want 3", s.Len())
	}
	c3.Remove() // evicted already: nothing happens
	if s.Len() != 3 {
		t.Errorf("Len after removing an evicted connection = %d, want 3", s.Len())
	}

	// c2 was looked at and moved back, ahead of c4 that came after: idle
	// since then, it goes first.
	e.add(t, s, "c5", ipA)
	e.check(t, "evict c2: "+ErrFull.Error())
	e.add(t, s, "c6", ipA)
	e.check(t, "evict c4: "+ErrFull.Error())

	// Everybody busy: refused.
	s.mu.Lock()
	for c := s.all.head; c != nil; c = c.all.next {
		c.Begin()
	}
	s.mu.Unlock()
	if _, err := e.try(s, "c7", ipA); !errors.Is(err, ErrFull) {
		t.Errorf("Add with every connection busy = %v, want ErrFull", err)
	}
	e.check(t)
	if s.Len() != 3 {
		t.Errorf("Len = %d, want 3", s.Len())
	}
}

// TestPerIP: an IP at its limit makes room among its own connections, or
// is refused; other IPs still connect.
func TestPerIP(t *testing.T) {
	var e events
	s := New(Limits{Max: 10, MaxPerIP: 2})
	defer s.Close()
	a1 := e.add(t, s, "a1", ipA)
	e.add(t, s, "b1", ipB)
	a2 := e.add(t, s, "a2", ipA)
	e.add(t, s, "a3", ipA)
	e.check(t, "evict a1: "+ErrIPFull.Error())
	a1.Remove()

	a2.Begin()
	s.mu.Lock()
	s.groups[Key(ipA)].conns.tail.Begin() // a3
	s.mu.Unlock()
	if _, err := e.try(s, "a4", ipA); !errors.Is(err, ErrIPFull) {
		t.Errorf("Add from a busy IP = %v, want ErrIPFull", err)
	}
	e.add(t, s, "b2", ipB)
	e.check(t)
	if s.Len() != 4 {
		t.Errorf("Len = %d, want 4", s.Len())
	}
}

// TestOneConnPerIP: with a limit of one per IP, a newcomer replaces the
// IP's connection.
func TestOneConnPerIP(t *testing.T) {
	var e events
	s := New(Limits{Max: 10, MaxPerIP: 1})
	defer s.Close()
	e.add(t, s, "a1", ipA)
	e.add(t, s, "a2", ipA)
	e.add(t, s, "a3", ipA)
	e.check(t, "evict a1: "+ErrIPFull.Error(), "evict a2: "+ErrIPFull.Error())
	if s.Len() != 1 {
		t.Errorf("Len = %d, want 1", s.Len())
	}
}

// TestKey: IPv4 addresses count alone (mapped or not), IPv6 ones by /64.
func TestKey(t *testing.T) {
	tests := []struct{ a, b string }{
		{"10.0.0.1", "::ffff:10.0.0.1"},
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff::7"},
	}
	for _, tt := range tests {
		if ka, kb := Key(netip.MustParseAddr(tt.a)), Key(netip.MustParseAddr(tt.b)); ka != kb {
			t.Errorf("Key(%s) = %v, Key(%s) = %v: want the same", tt.a, ka, tt.b, kb)
		}
	}
	if Key(netip.MustParseAddr("2001:db8:1:2::1")) == Key(netip.MustParseAddr("2001:db8:1:3::1")) {
		t.Error("two /64s share a key")
	}
}

// TestIdle: a connection idle for the idle timeout is told to go away
// within twice that; a busy one, or one active meanwhile, stays.
func TestIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e events
		s := New(Limits{Max: 10, MaxPerIP: 10, Idle: time.Minute})
		defer s.Close()
		e.add(t, s, "idle", ipA)
		busy := e.add(t, s, "busy", ipA)
		busy.Begin()
		active := e.add(t, s, "active", ipA)
		time.Sleep(30 * time.Second)
		active.Begin()
		active.End()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		e.check(t, "go away idle")
		if s.Len() != 2 {
			t.Errorf("Len = %d, want 2", s.Len())
		}

		busy.End()
		time.Sleep(time.Minute) // "active" has been idle 90s, "busy" 60s
		synctest.Wait()
		e.check(t, "go away active")
		time.Sleep(time.Minute)
		synctest.Wait()
		e.check(t, "go away busy")
		if s.Len() != 0 {
			t.Errorf("Len = %d, want 0", s.Len())
		}

		// A new connection after the set emptied is swept too.
		e.add(t, s, "late", ipA)
		time.Sleep(time.Minute)
		synctest.Wait()
		e.check(t, "go away late")
	})
}

// TestNoIdleBound: without an idle timeout, an idle connection is never
// told to go away.
func TestNoIdleBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e events
		s := New(Limits{Max: 10, MaxPerIP: 10})
		defer s.Close()
		e.add(t, s, "idle", ipA)
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		e.check(t)
		if s.Len() != 1 {
			t.Errorf("Len = %d, want 1", s.Len())
		}
	})
}

// TestClose: after Close, Add fails and nothing is swept.
func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var e events
		s := New(Limits{Max: 10, MaxPerIP: 10, Idle: time.Minute})
		e.add(t, s, "c", ipA)
		s.Close()
		if _, err := e.try(s, "d", ipA); !errors.Is(err, ErrClosed) {
			t.Errorf("Add after Close = %v", err)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		e.check(t)
	})
}
