package connset

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Limits are a listener's connection limits.
type Limits struct {
	Max      int           // connections at once; at least 1
	MaxPerIP int           // connections at once from one IP; at least 1
	Reserve  int           // of Max, the connections only IPs with fewer than FewConns take
	Idle     time.Duration // how long a connection may stay without a request in flight; 0 for ever
}

// FewConns is the number of connections from which an IP no longer takes
// the connections kept in reserve (Limits.Reserve): a caller usually holds
// one connection to a node, so the reserve keeps room for new callers
// however many connections a few IPs hold.
const FewConns = 4

// The reasons a connection is refused, or closed to make room for
// another.
var (
	ErrFull     = errors.New("too many connections (WithMaxConns), none idle")
	ErrReserved = errors.New("too many connections (WithMaxConns), the rest kept for IPs with few connections; none idle")
	ErrShare    = errors.New("too many connections (WithMaxConns), the most from this IP")
	ErrIPFull   = errors.New("too many connections from the same IP (WithMaxConnsPerIP), none idle")
	ErrClosed   = errors.New("the listener is closed")
)

// maxScan bounds the connections looked at in search of one to close: a
// set full of busy connections refuses a newcomer in constant time.
const maxScan = 64

// Set is a listener's connections. Create it with [New].
type Set struct {
	lim Limits

	mu     sync.Mutex
	n      int
	groups map[netip.Prefix]*group
	tally  tally      // the groups by their number of connections
	all    list[Conn] // every connection, the one idle longest (as far as known) first
	timer  *time.Timer
	armed  bool
	closed bool
}

// group is the connections of one IP.
type group struct {
	n     int
	conns list[Conn] // the one idle longest (as far as known) first
	tally links[group]
}

// Conn is one connection of a [Set].
type Conn struct {
	set *Set
	key netip.Prefix
	g   *group

	// state counts requests in flight (low 32 bits) and every start and
	// end of a request (high 32 bits), so that an unchanged value means
	// nothing happened.
	state atomic.Uint64

	// Guarded by set.mu.
	seen    uint64    // state when the set last looked
	since   time.Time // when the set last looked
	all, ip links[Conn]
	member  bool
	evict   func(why error)
	goAway  func()
}

// New returns an empty set with limits lim.
func New(lim Limits) *Set {
	return &Set{lim: lim, groups: map[netip.Prefix]*group{}, all: list[Conn]{which: byAll}}
}

// Key is the IP a connection from addr counts against: the address for
// IPv4, its /64 for IPv6 (a host usually has a whole /64).
func Key(addr netip.Addr) netip.Prefix {
	addr = addr.Unmap()
	bits := 32
	if addr.Is6() {
		bits = 64
	}
	p, _ := addr.Prefix(bits)
	return p
}

// Add admits a connection from addr, making room when the set is at a
// limit (see room): the connection chosen is removed and its evict
// called with the reason. When there is none to close, Add returns the
// limit's error and admits nothing. goAway is called, once, when the
// connection has been idle past the idle timeout; it is removed then. The
// caller removes the connection with [Conn.Remove] when it ends.
func (s *Set) Add(addr netip.Addr, evict func(why error), goAway func()) (*Conn, error) {
	key := Key(addr)
	now := time.Now()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	g := s.groups[key]
	victim, why := s.room(g, now)
	if victim == nil && why != nil {
		s.mu.Unlock()
		return nil, why
	}
	if victim != nil {
		s.removeLocked(victim)
		if g != nil && g.n == 0 {
			g = nil // removeLocked dropped it
		}
	}
	if g == nil {
		g = &group{conns: list[Conn]{which: byIP}}
		s.groups[key] = g
	}
	c := &Conn{set: s, key: key, g: g, since: now, member: true, evict: evict, goAway: goAway}
	s.all.pushBack(c)
	g.conns.pushBack(c)
	s.n++
	g.n++
	s.tally.up(g)
	if s.lim.Idle > 0 && !s.armed {
		s.armLocked(now)
	}
	s.mu.Unlock()
	if victim != nil {
		victim.evict(why)
	}
	return c, nil
}

// room returns what admitting a connection from the IP of g (nil: an IP
// without connections) takes: nothing (nil, nil) when the set has room;
// else a connection to close and why, or only why when the newcomer is
// refused. Callers hold s.mu.
//
// An IP at the per-IP limit makes room among its own connections. Past
// the maximum, or past the maximum less the reserve for an IP with
// FewConns or more, the IP with the most connections gives way when it
// has at least two more than the newcomer's, whether its connections are
// busy or not (their callers send the requests cut off again: the node's
// de-duplication answers a refeed without running the call twice); with
// one more, only an idle connection of it goes, so that two IPs do not
// take turns closing each other's; otherwise the newcomer's IP makes room
// among its own connections. So a few IPs, however active, leave room for
// new callers, and a caller never loses its connection to an IP with more.
func (s *Set) room(g *group, now time.Time) (*Conn, error) {
	n := 0
	if g != nil {
		n = g.n
	}
	if n >= s.lim.MaxPerIP {
		return s.pick(g, now, false), ErrIPFull
	}
	full := ErrFull
	switch {
	case s.n >= s.lim.Max:
	case s.n >= s.lim.Max-s.lim.Reserve && n >= FewConns:
		full = ErrReserved
	default:
		return nil, nil
	}
	if h := s.tally.heaviest(); h != nil && h.n > n+1 {
		return s.pick(h, now, true), ErrShare
	} else if h != nil && h.n == n+1 {
		if c := s.idlest(h, now); c != nil {
			return c, full
		}
	}
	if g == nil {
		return nil, full
	}
	return s.pick(g, now, false), full
}

// idlest returns the connection of g idle since the set last looked at
// it, the one looked at earliest; connections found active are moved to
// the back. It returns nil when the first maxScan are all active.
// Callers hold s.mu.
func (s *Set) idlest(g *group, now time.Time) *Conn {
	c := g.conns.head
	for range min(maxScan, g.n) {
		next := c.ip.next
		if c.idle() {
			return c
		}
		s.touchLocked(c, now)
		c = next
	}
	return nil
}

// pick returns the connection of g to close: among the first maxScan, the
// idlest, else the first looked at without a request in flight, else,
// when busy allows it, the first looked at, else nil. Callers hold s.mu.
func (s *Set) pick(g *group, now time.Time, busy bool) *Conn {
	first, free := g.conns.head, (*Conn)(nil)
	c := first
	for range min(maxScan, g.n) {
		next := c.ip.next
		if c.idle() {
			return c
		}
		if free == nil && c.inFlight() == 0 {
			free = c
		}
		s.touchLocked(c, now)
		c = next
	}
	switch {
	case free != nil:
		return free
	case busy:
		return first
	}
	return nil
}

// idle reports whether c has had no request in flight and none started
// or ended since the set last looked. Callers hold s.mu.
func (c *Conn) idle() bool {
	st := c.state.Load()
	return st == c.seen && uint32(st) == 0
}

// inFlight returns the number of c's requests in flight.
func (c *Conn) inFlight() uint32 { return uint32(c.state.Load()) }

// touchLocked records that the set looked at c now and found it active:
// it moves to the back. Callers hold s.mu.
func (s *Set) touchLocked(c *Conn, now time.Time) {
	c.seen, c.since = c.state.Load(), now
	s.all.moveBack(c)
	c.g.conns.moveBack(c)
}

// removeLocked takes c out of the set. Callers hold s.mu.
func (s *Set) removeLocked(c *Conn) {
	if !c.member {
		return
	}
	c.member = false
	s.all.remove(c)
	c.g.conns.remove(c)
	s.n--
	c.g.n--
	s.tally.down(c.g)
	if c.g.n == 0 {
		delete(s.groups, c.key)
	}
}

// armLocked arms the idle sweep for when the connection at the front may
// have been idle for the idle timeout. Callers hold s.mu.
func (s *Set) armLocked(now time.Time) {
	if s.all.head == nil {
		s.armed = false
		return
	}
	d := s.all.head.since.Add(s.lim.Idle).Sub(now)
	if s.timer == nil {
		s.timer = time.AfterFunc(d, s.sweep)
	} else {
		s.timer.Reset(d)
	}
	s.armed = true
}

// sweep removes the connections idle for the idle timeout and tells them
// to go away.
func (s *Set) sweep() {
	now := time.Now()
	var gone []*Conn
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	for c := s.all.head; c != nil && !now.Before(c.since.Add(s.lim.Idle)); c = s.all.head {
		if c.idle() {
			s.removeLocked(c)
			gone = append(gone, c)
		} else {
			s.touchLocked(c, now)
		}
	}
	s.armLocked(now)
	s.mu.Unlock()
	for _, c := range gone {
		c.goAway()
	}
}

// Len returns the number of connections in the set.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Close stops the idle sweep; later calls to Add fail with [ErrClosed].
// The connections are the caller's to close.
func (s *Set) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
}

// Begin records that a request of c started.
func (c *Conn) Begin() { c.state.Add(1<<32 + 1) }

// End records that a request of c ended.
func (c *Conn) End() { c.state.Add(1<<32 - 1) }

// Remove takes c out of its set, if it is still there: the connection
// has ended.
func (c *Conn) Remove() {
	s := c.set
	s.mu.Lock()
	s.removeLocked(c)
	s.mu.Unlock()
}
