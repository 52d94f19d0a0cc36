package connset

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

// ip returns the address 10.0.0.i.
func ip(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}) }

// addBusy adds n connections from addr named prefix1..prefixN, each with
// a request in flight.
func (e *events) addBusy(t *testing.T, s *Set, prefix string, addr netip.Addr, n int) []*Conn {
	t.Helper()
	cs := make([]*Conn, n)
	for i := range cs {
		cs[i] = e.add(t, s, fmt.Sprintf("%s%d", prefix, i+1), addr)
		cs[i].Begin()
	}
	return cs
}

// checkOne checks that the set evicted one connection, whose name starts
// with prefix, for why.
func (e *events) checkOne(t *testing.T, prefix string, why error) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.got) != 1 || !strings.HasPrefix(e.got[0], prefix) || !strings.HasSuffix(e.got[0], ": "+why.Error()) {
		t.Errorf("events = %q, want one %q...: %v", e.got, prefix, why)
	}
	e.got = nil
}

// TestHeaviestGivesWay: a full set of busy connections takes a connection
// from a new IP by closing one of the IP with the most, one without a
// request in flight when it has one; an IP with the most, or one more
// than the others, cannot push anyone out.
func TestHeaviestGivesWay(t *testing.T) {
	var e events
	s := New(Limits{Max: 8, MaxPerIP: 8})
	defer s.Close()
	a := e.addBusy(t, s, "a", ip(1), 5)
	e.addBusy(t, s, "b", ip(2), 3)
	a[2].End() // active since the set looked, nothing in flight now
	e.add(t, s, "c1", ip(3))
	e.check(t, "evict a3: "+ErrShare.Error())

	// a has 4, b 3: b's newcomer may only take an idle connection of a's.
	if _, err := e.try(s, "b4", ip(2)); !errors.Is(err, ErrFull) {
		t.Errorf("Add from an IP one behind the most = %v, want ErrFull", err)
	}
	// a, the most, cannot push anyone out.
	if _, err := e.try(s, "a6", ip(1)); !errors.Is(err, ErrFull) {
		t.Errorf("Add from the IP with the most = %v, want ErrFull", err)
	}
	e.check(t)

	// All busy: a new IP still takes one of a's, the first looked at.
	e.add(t, s, "d1", ip(4))
	e.check(t, "evict a1: "+ErrShare.Error())
	if s.Len() != 8 {
		t.Errorf("Len = %d, want 8", s.Len())
	}
}

// TestIdleOfTheHeaviest: when the newcomer's IP has one connection less
// than the IP with the most, an idle connection of that IP makes room.
func TestIdleOfTheHeaviest(t *testing.T) {
	var e events
	s := New(Limits{Max: 3, MaxPerIP: 3})
	defer s.Close()
	e.add(t, s, "a1", ip(1))
	e.addBusy(t, s, "b", ip(2), 1)
	e.addBusy(t, s, "c", ip(3), 1)
	e.add(t, s, "d1", ip(4))
	e.check(t, "evict a1: "+ErrFull.Error())
}

// TestReserve: the last Reserve connections go only to IPs with fewer
// than FewConns; an IP with more is refused there, or takes the place of
// a connection of its own without a request in flight.
func TestReserve(t *testing.T) {
	var e events
	s := New(Limits{Max: 10, MaxPerIP: 10, Reserve: 3})
	defer s.Close()
	a := e.addBusy(t, s, "a", ip(1), 7)
	if _, err := e.try(s, "a8", ip(1)); !errors.Is(err, ErrReserved) {
		t.Errorf("Add into the reserve from an IP with 7 = %v, want ErrReserved", err)
	}
	a[1].End() // a2: nothing in flight now
	e.add(t, s, "a9", ip(1))
	e.check(t, "evict a2: "+ErrReserved.Error())

	e.add(t, s, "b1", ip(2))
	e.add(t, s, "b2", ip(2))
	e.add(t, s, "b3", ip(2))
	e.check(t)
	if s.Len() != 10 {
		t.Errorf("Len = %d, want 10", s.Len())
	}
	// Full: an IP with fewer connections takes one of a's, the idle a9
	// first, then a busy one.
	e.add(t, s, "b4", ip(2))
	e.check(t, "evict a9: "+ErrShare.Error())
	e.add(t, s, "c1", ip(3))
	e.checkOne(t, "evict a", ErrShare)
}

// TestLighterKeepsIdle: an idle connection of an IP with fewer
// connections is not closed for an IP with more.
func TestLighterKeepsIdle(t *testing.T) {
	var e events
	s := New(Limits{Max: 4, MaxPerIP: 4})
	defer s.Close()
	e.add(t, s, "a1", ip(1)) // idle
	e.addBusy(t, s, "b", ip(2), 3)
	if _, err := e.try(s, "b4", ip(2)); !errors.Is(err, ErrFull) {
		t.Errorf("Add = %v, want ErrFull", err)
	}
	e.check(t)
}

// TestTally: through random admissions and removals, the tally's
// heaviest group has the most connections.
func TestTally(t *testing.T) {
	s := New(Limits{Max: 200, MaxPerIP: 50})
	defer s.Close()
	r := rand.New(rand.NewPCG(1, 2))
	var conns []*Conn
	nop := func(error) {}
	for i := range 5000 {
		if len(conns) > 0 && r.IntN(3) == 0 {
			k := r.IntN(len(conns))
			conns[k].Remove()
			conns[k] = conns[len(conns)-1]
			conns = conns[:len(conns)-1]
		} else if c, err := s.Add(ip(1+r.IntN(8)), nop, func() {}); err == nil {
			conns = append(conns, c)
		}
		s.mu.Lock()
		most := 0
		for _, g := range s.groups {
			most = max(most, g.n)
		}
		got := 0
		if h := s.tally.heaviest(); h != nil {
			got = h.n
		}
		s.mu.Unlock()
		if got != most {
			t.Fatalf("step %d: heaviest has %d connections, the most is %d", i, got, most)
		}
	}
	// Emptied, the tally holds no group, in no list.
	for _, c := range conns {
		c.Remove()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tally.top != 0 || s.tally.heaviest() != nil {
		t.Errorf("emptied: top %d, heaviest %v; want none", s.tally.top, s.tally.heaviest())
	}
	for k, l := range s.tally.byN {
		if l.head != nil {
			t.Errorf("emptied: a group left in the list of %d connections", k)
		}
	}
}

// TestNoTakingTurns: an IP one connection behind the IP with the most
// does not close its connections that are active, though without a
// request in flight: the two would take turns closing each other's.
func TestNoTakingTurns(t *testing.T) {
	var e events
	s := New(Limits{Max: 3, MaxPerIP: 3})
	defer s.Close()
	for _, c := range []*Conn{e.add(t, s, "a1", ip(1)), e.add(t, s, "a2", ip(1))} {
		c.Begin()
		c.End()
	}
	e.addBusy(t, s, "b", ip(2), 1)
	if _, err := e.try(s, "b2", ip(2)); !errors.Is(err, ErrFull) {
		t.Errorf("Add = %v, want ErrFull", err)
	}
	e.check(t)
}
