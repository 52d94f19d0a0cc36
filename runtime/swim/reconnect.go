package swim

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// memberlist contacts a member it declared dead only for
// GossipToTheDeadTime, and then forgets it: the two sides of a partition
// that lasted longer never hear of each other again. So, as Serf does, a
// Discovery keeps the members that failed (not those that left) for a
// while and joins their gossip addresses again every reconnect interval,
// and joins again those of its seeds that are not live members (runJoin).
// One join across a healed partition merges both sides: a push-pull
// exchanges every member each side knows, and gossip spreads them.

const (
	maxFailed      = 512 // failed members kept; beyond, the oldest death is forgotten
	maxJoinsPerRun = 3   // reconnect attempts per round, and seed re-joins per re-join
	maxBackoff     = 3   // the longest wait between attempts to one address, in intervals
	rejoinEvery    = 3   // seed re-joins, in reconnect intervals
)

// errNotMerged: a join answered, and still no live member has the
// address joined (it runs no wizard node this one accepts, or both sides
// still hold each other dead).
var errNotMerged = errors.New("wizard: swim: joined, but no live member has the address")

// jitter returns a random duration within [d/2, d], so that a fleet does
// not act in step.
func jitter(d time.Duration) time.Duration { return d/2 + rand.N(d/2+1) }

// failure is a member memberlist declared dead.
type failure struct {
	name, addr string // memberlist name, gossip address ("ip:port")
	died       time.Time
	confirmed  bool      // memberlist holds it dead, not left; else classify decides
	fails      int       // attempts failed in a row
	next       time.Time // no attempt before
	warned     bool      // its unreachability was logged at Warn
}

// failures is the table of failed members to reconnect to, one per gossip
// address. memberlist's delegates update it under memberlist's lock, so
// its methods only touch the table.
type failures struct {
	mu      sync.Mutex
	byAddr  map[string]*failure
	addrOf  map[string]string // name → address, of the members in byAddr
	verify  bool              // new entries wait for classify
	pending int               // entries not confirmed
}

func (f *failures) init() { f.byAddr, f.addrOf = map[string]*failure{}, map[string]string{} }

// setVerify says whether a member gone is tried only once classify has
// seen memberlist hold it dead rather than left.
func (f *failures) setVerify(verify bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.verify = verify
}

// gone records a member memberlist reported gone, dead or left.
func (f *failures) gone(name, addr string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a, ok := f.addrOf[name]; ok {
		f.remove(a)
	}
	f.remove(addr)
	e := &failure{name: name, addr: addr, died: now, confirmed: !f.verify}
	f.byAddr[addr], f.addrOf[name] = e, addr
	if !e.confirmed {
		f.pending++
	}
	if len(f.byAddr) > maxFailed {
		var oldest *failure
		for _, e := range f.byAddr {
			if oldest == nil || e.died.Before(oldest.died) {
				oldest = e
			}
		}
		f.remove(oldest.addr)
	}
}

// alive forgets the member name, and any failure at addr: a live member
// has that address now (a node restarted under a new name).
func (f *failures) alive(name, addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a, ok := f.addrOf[name]; ok {
		f.remove(a)
	}
	f.remove(addr)
}

// forget forgets the failure at addr.
func (f *failures) forget(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.remove(addr)
}

func (f *failures) remove(addr string) {
	e := f.byAddr[addr]
	if e == nil {
		return
	}
	if !e.confirmed {
		f.pending--
	}
	delete(f.byAddr, addr)
	delete(f.addrOf, e.name)
}

// classify confirms the entries memberlist holds dead, or no longer holds
// at all (forgotten after GossipToTheDeadTime: most likely dead), and
// forgets those that left or are alive again.
func (f *failures) classify(states map[string]memberlist.NodeStateType) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending == 0 {
		return
	}
	for addr, e := range f.byAddr {
		if e.confirmed {
			continue
		}
		switch s, ok := states[e.name]; {
		case !ok || s == memberlist.StateDead:
			e.confirmed = true
			f.pending--
		default: // left, or alive again
			f.remove(addr)
		}
	}
}

// due returns the failures to try now: confirmed, next attempt due, and
// no live member at their address; at most maxJoinsPerRun, chosen at
// random. It forgets the failures older than timeout and those at a live
// member's address.
func (f *failures) due(now time.Time, live map[string]bool, timeout time.Duration) []failure {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []failure
	for addr, e := range f.byAddr {
		switch {
		case live[addr] || now.Sub(e.died) > timeout:
			f.remove(addr)
		case e.confirmed && !now.Before(e.next):
			out = append(out, *e)
		}
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out[:min(len(out), maxJoinsPerRun)]
}

// failed records a failed attempt at addr: the next waits interval,
// doubling with each failure up to maxBackoff intervals, jittered. warn
// says the wait has reached its longest for the first time.
func (f *failures) failed(addr string, now time.Time, interval time.Duration) (warn bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.byAddr[addr]
	if e == nil {
		return false
	}
	e.fails++
	wait := maxBackoff * interval
	if e.fails <= maxBackoff { // no overflow: the shift stays small
		wait = min(wait, interval<<(e.fails-1))
	}
	e.next = now.Add(jitter(wait))
	if wait == maxBackoff*interval && !e.warned {
		e.warned = true
		return true
	}
	return false
}

// len is the number of failures kept.
func (f *failures) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.byAddr)
}

// runReconnect tries the failed members every reconnect interval,
// jittered, until Close.
func (d *Discovery) runReconnect(ctx context.Context) {
	defer d.wg.Done()
	timer := time.NewTimer(jitter(d.reconnectEvery))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		for i, f := range d.failed.due(time.Now(), d.liveAddrs(), d.reconnectFor) {
			switch {
			case ctx.Err() != nil:
				return
			case i > 0 && d.liveAddrs()[f.addr]: // merged by the attempt before
				d.failed.forget(f.addr)
			default:
				d.reconnect(ctx, f)
			}
		}
		timer.Reset(jitter(d.reconnectEvery))
	}
}

// reconnect joins a failed member's address once.
func (d *Discovery) reconnect(ctx context.Context, f failure) {
	live, err := d.joinAddr(ctx, f.addr)
	if ctx.Err() != nil {
		return
	}
	if live {
		d.failed.forget(f.addr)
		d.log.Info("wizard: swim: reconnected to a failed member", "member", f.name, "addr", f.addr, "down", time.Since(f.died).Round(time.Millisecond), "members", d.ml.NumMembers())
		return
	}
	level := slog.LevelDebug
	if d.failed.failed(f.addr, time.Now(), d.reconnectEvery) {
		level = slog.LevelWarn // once per member: it has been unreachable for a while
	}
	d.log.Log(ctx, level, "wizard: swim: a failed member is still unreachable; retrying", "member", f.name, "addr", f.addr, "down", time.Since(f.died).Round(time.Millisecond), "err", err)
}

// joinAddr joins addr and says whether a live member has that address
// then. The first join across a partition healed before memberlist forgot
// the dead can leave both sides ignoring the other's members: each still
// holds the other dead at the incarnation its alive messages carry. Each
// side refutes its own death on that join, with a newer incarnation, and
// gossips it, to the members it holds dead too; but gossip picks a few
// members at random, in a large cluster seldom the other side's, so a
// second join carries the refutations across.
func (d *Discovery) joinAddr(ctx context.Context, addr string) (live bool, err error) {
	for i := range 2 {
		if i > 0 && ctx.Err() != nil {
			return false, ctx.Err()
		}
		n, err := d.ml.Join([]string{addr})
		if n == 0 {
			return false, err
		}
		if d.liveAddrs()[addr] {
			return true, nil
		}
	}
	return false, errNotMerged
}

// liveAddrs is the set of gossip addresses of the live members, this node
// included. It reads the table the delegates keep, not ml.Members():
// memberlist hands out its own Node records there and writes them under
// its lock, which a reader outside cannot take.
func (d *Discovery) liveAddrs() map[string]bool {
	d.live.mu.Lock()
	defer d.live.mu.Unlock()
	live := make(map[string]bool, len(d.live.addr)+1)
	for _, a := range d.live.addr {
		live[a] = true
	}
	live[d.GossipAddr()] = true
	return live
}

// liveMembers is the gossip address of every live member by name, kept by
// the delegates (memberlist calls them with its lock held, so the Node
// they get is read safely there).
type liveMembers struct {
	mu   sync.Mutex
	addr map[string]string
}

func (l *liveMembers) up(name, addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.addr == nil {
		l.addr = make(map[string]string)
	}
	l.addr[name] = addr
}

func (l *liveMembers) down(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.addr, name)
}
