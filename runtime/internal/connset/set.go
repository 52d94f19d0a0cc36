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
	Idle     time.Duration // how long a connection may stay without a request in flight; 0 for ever
}

// The reasons a connection is refused, or closed to make room for
// another.
var (
	ErrFull   = errors.New("too many connections (WithMaxConns), none idle")
	ErrIPFull = errors.New("too many connections from the same IP (WithMaxConnsPerIP), none idle")
	ErrClosed = errors.New("the listener is closed")
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
	all    list // every connection, the one idle longest (as far as known) first
	timer  *time.Timer
	armed  bool
	closed bool
}

// group is the connections of one IP.
type group struct {
	n     int
	conns list
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
	all, ip links
	member  bool
	evict   func(why error)
	goAway  func()
}

// New returns an empty set with limits lim.
func New(lim Limits) *Set {
	return &Set{lim: lim, groups: map[netip.Prefix]*group{}}
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
// limit: the connection in the way that has been idle the longest is
// removed and its evict called with the limit ([ErrFull] or [ErrIPFull]).
// When every one in the way is busy, Add returns that error and admits
// nothing. goAway is called, once, when the connection has been idle past
// the idle timeout; it is removed then. The caller removes the connection
// with [Conn.Remove] when it ends.
func (s *Set) Add(addr netip.Addr, evict func(why error), goAway func()) (*Conn, error) {
	key := Key(addr)
	now := time.Now()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	var victim *Conn
	var why error
	g := s.groups[key]
	switch {
	case g != nil && g.n >= s.lim.MaxPerIP:
		victim, why = s.idlest(&g.conns, byIP, now), ErrIPFull
	case s.n >= s.lim.Max:
		victim, why = s.idlest(&s.all, byAll, now), ErrFull
	}
	if why != nil {
		if victim == nil {
			s.mu.Unlock()
			return nil, why
		}
		s.removeLocked(victim)
		if g != nil && g.n == 0 {
			g = nil // removeLocked dropped it
		}
	}
	if g == nil {
		g = &group{}
		s.groups[key] = g
	}
	c := &Conn{set: s, key: key, g: g, since: now, member: true, evict: evict, goAway: goAway}
	s.all.pushBack(c, byAll)
	g.conns.pushBack(c, byIP)
	s.n++
	g.n++
	if s.lim.Idle > 0 && !s.armed {
		s.armLocked(now)
	}
	s.mu.Unlock()
	if victim != nil {
		victim.evict(why)
	}
	return c, nil
}

// idlest returns the connection of l idle since the set last looked at
// it, the one looked at earliest; connections found active are moved to
// the back. It returns nil when the first maxScan are all active.
// Callers hold s.mu.
func (s *Set) idlest(l *list, which linkSel, now time.Time) *Conn {
	c := l.head
	for range maxScan {
		if c == nil {
			return nil
		}
		next := which(c).next
		if c.idle() {
			return c
		}
		s.touchLocked(c, now)
		c = next
	}
	return nil
}

// idle reports whether c has had no request in flight and none started
// or ended since the set last looked. Callers hold s.mu.
func (c *Conn) idle() bool {
	st := c.state.Load()
	return st == c.seen && uint32(st) == 0
}

// touchLocked records that the set looked at c now and found it active:
// it moves to the back. Callers hold s.mu.
func (s *Set) touchLocked(c *Conn, now time.Time) {
	c.seen, c.since = c.state.Load(), now
	s.all.remove(c, byAll)
	s.all.pushBack(c, byAll)
	c.g.conns.remove(c, byIP)
	c.g.conns.pushBack(c, byIP)
}

// removeLocked takes c out of the set. Callers hold s.mu.
func (s *Set) removeLocked(c *Conn) {
	if !c.member {
		return
	}
	c.member = false
	s.all.remove(c, byAll)
	c.g.conns.remove(c, byIP)
	s.n--
	if c.g.n--; c.g.n == 0 {
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
