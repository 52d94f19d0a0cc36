package swim_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/pattern"
	"github.com/wizardmesh/wizard/runtime/swim"
)

// partition splits ms into sides that cannot reach each other's gossip
// addresses, through each node's gossip transport.
func partition(sides ...[]*member) {
	side := map[string]int{}
	for i, s := range sides {
		for _, m := range s {
			side[m.d.GossipAddr()] = i
		}
	}
	for i, s := range sides {
		for _, m := range s {
			m.d.Partition(func(addr string) bool {
				j, ok := side[addr]
				return ok && j != i
			})
		}
	}
}

// heal ends the partition of every node of ms.
func heal(ms []*member) {
	for _, m := range ms {
		m.d.Heal()
	}
}

// seesOnly says whether every member of each side sees exactly its side
// alive and, when forgotten is set, whether memberlist's tables hold no
// member of another side, dead or alive (GossipToTheDeadTime passed since
// the death: memberlist gossips to the dead no more).
func seesOnly(forgotten bool, sides ...[]*member) bool {
	for _, s := range sides {
		for _, m := range s {
			if m.d.NumMembers() != len(s) || forgotten && m.d.Known() != len(s) {
				return false
			}
		}
	}
	return true
}

// merged says whether every member of ms sees every member alive and
// routes every other member's pattern to it.
func merged(ms []*member) bool {
	for _, m := range ms {
		if m.d.NumMembers() != len(ms) {
			return false
		}
		for _, o := range ms {
			if o != m && !routesTo(m.n, pattern.MustParse(o.pattern()), o.id) {
				return false
			}
		}
	}
	return true
}

// splitAndHeal partitions ms into sides until each side has declared the
// others dead (and, with forget, until memberlist has forgotten them),
// keeps the partition hold longer, heals it, and returns how long after the heal every member
// saw and routed every other; it fails t when that is over limit. Then a
// call from each side to a member of every other succeeds.
func splitAndHeal(t *testing.T, forget bool, hold, limit time.Duration, sides ...[]*member) time.Duration {
	t.Helper()
	var ms []*member
	for _, s := range sides {
		ms = append(ms, s...)
	}
	testwait.Until(t, "the cluster did not form", func() bool { return merged(ms) })
	start := time.Now()
	partition(sides...)
	// Declaring the others dead takes the suspicion timeout, forgetting
	// them GossipToTheDeadTime more: 90 s covers LAN's 24 s and 30 s.
	guard := max(testwait.Guard, 90*time.Second)
	split := testwait.Within(t, guard, "the sides did not split", func() bool { return seesOnly(forget, sides...) })
	t.Logf("split after %v", round(split))
	time.Sleep(hold) // the partition's length, not synchronisation
	healed := time.Now()
	heal(ms)
	took := testwait.Within(t, max(testwait.Guard, 2*limit), "the sides did not merge", func() bool { return merged(ms) })
	if took > limit {
		t.Errorf("merged %v after the heal, over %v (partition lasted %v)", round(took), limit, round(healed.Sub(start)))
	}
	for i, s := range sides {
		for j, o := range sides {
			if i != j {
				callEventually(t, s[0], o[0].pattern(), o[0].id)
			}
		}
	}
	return took
}

// onceSeed is a seed function that names addr until the node has joined a
// cluster, then nothing: only reconnects to failed members can heal a
// partition of its node.
func onceSeed(addr string) swim.Option {
	var mu sync.Mutex
	given := false
	return swim.WithSeedFunc(func(context.Context) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		if given {
			return nil, nil
		}
		given = true
		return []string{addr}, nil
	})
}

// TestRemerge partitions clusters with the Fast preset for longer than
// failure detection and GossipToTheDeadTime (3 s), so that each side has
// declared the other dead and forgotten it, and heals them: within 10 s,
// every member sees every other and routes calls to it again. The nodes
// reconnect to the members that failed and join their seeds again, also
// a seed unreachable at first and a DNS seed's new address.
func TestRemerge(t *testing.T) {
	leak.Check(t)
	const limit = 10 * time.Second
	t.Run("two nodes", func(t *testing.T) {
		t.Parallel()
		a := startMember(t, "two-a")
		b := startMember(t, "two-b", swim.WithSeeds(a.d.GossipAddr()))
		ms := []*member{a, b}
		t.Cleanup(func() { closeAll(ms) })
		took := splitAndHeal(t, true, 0, limit, ms[:1], ms[1:])
		t.Logf("merged %v after the heal", round(took))
	})
	t.Run("five nodes split 3/2", func(t *testing.T) {
		t.Parallel()
		ms := startCluster(t, "five", 5)
		took := splitAndHeal(t, true, 0, limit, ms[:3], ms[3:])
		t.Logf("merged %v after the heal", round(took))
	})
	// Without seeds to join again, only reconnects heal.
	t.Run("reconnect alone", func(t *testing.T) {
		t.Parallel()
		a := startMember(t, "rc-a")
		b := startMember(t, "rc-b", onceSeed(a.d.GossipAddr()))
		ms := []*member{a, b}
		t.Cleanup(func() { closeAll(ms) })
		took := splitAndHeal(t, true, 0, limit, ms[:1], ms[1:])
		t.Logf("merged %v after the heal", round(took))
	})
	// Healed while each side still holds the other dead, once the news of
	// the death has gone out (memberlist retransmits it a few times, to the
	// dead too): alive messages at the incarnation the other side declared
	// dead are ignored until the joined node refutes its death with a newer
	// one.
	t.Run("healed before the dead are forgotten", func(t *testing.T) {
		t.Parallel()
		a := startMember(t, "early-a")
		b := startMember(t, "early-b", onceSeed(a.d.GossipAddr()))
		ms := []*member{a, b}
		t.Cleanup(func() { closeAll(ms) })
		took := splitAndHeal(t, false, time.Second, limit, ms[:1], ms[1:])
		t.Logf("merged %v after the heal", round(took))
	})
	t.Run("seed reachable later", func(t *testing.T) {
		t.Parallel()
		seedLater(t)
	})
	t.Run("DNS seed moved", func(t *testing.T) {
		t.Parallel()
		dnsSeedMoved(t)
	})
	// The LAN preset's timeouts with quicker failure detection and
	// reconnects (TestMeasureRemerge has its own).
	t.Run("LAN quickened", func(t *testing.T) {
		t.Parallel()
		a := startMember(t, "lan-a", lanQuick()...)
		b := startMember(t, "lan-b", append(lanQuick(), onceSeed(a.d.GossipAddr()))...)
		ms := []*member{a, b}
		t.Cleanup(func() { closeAll(ms) })
		took := splitAndHeal(t, true, 0, limit, ms[:1], ms[1:])
		t.Logf("merged %v after the heal", round(took))
	})
}

// seedLater: a node whose seed is unreachable when it starts, and which
// another node then joins, joins its seed once the seed is reachable:
// being joined does not end its joining.
func seedLater(t *testing.T) {
	seed := startMember(t, "later-seed")
	seed.d.Partition(func(string) bool { return true })
	seedAddr := seed.d.GossipAddr()
	notSeed := func(addr string) bool { return addr == seedAddr }
	n := startMember(t, "later-n", swim.WithSeeds(seedAddr))
	n.d.Partition(notSeed)
	attempts := n.d.JoinAttempts()
	testwait.Until(t, "no second join attempt", func() bool { return n.d.JoinAttempts() > attempts })
	m := startMember(t, "later-m", swim.WithSeeds(n.d.GossipAddr()))
	m.d.Partition(notSeed)
	ms := []*member{seed, n, m}
	t.Cleanup(func() { closeAll(ms) })
	testwait.Until(t, "m did not join n", func() bool { return seesOnly(false, ms[:1], ms[1:]) })
	attempts = n.d.JoinAttempts()
	testwait.Until(t, "n made no join attempt after being joined", func() bool { return n.d.JoinAttempts() > attempts })
	heal(ms)
	took := testwait.Within(t, testwait.Guard, "n never joined its seed", func() bool { return merged(ms) })
	if limit := 10 * time.Second; took > limit {
		t.Errorf("merged %v after the seed became reachable, over %v", round(took), limit)
	}
	t.Logf("merged %v after the seed became reachable", round(took))
}

// dnsSeedMoved: a node joined through a DNS seed joins the address the
// name resolves to later, a node alone (the first of its own cluster).
func dnsSeedMoved(t *testing.T) {
	dns := startDNS(t)
	x := startMember(t, "dnsre-x")
	y := startMember(t, "dnsre-y")
	host, port, _ := net.SplitHostPort(x.d.GossipAddr())
	_, portY, _ := net.SplitHostPort(y.d.GossipAddr())
	px, _ := strconv.Atoi(port)
	py, _ := strconv.Atoi(portY)
	dns.setA("node.wizard.test.", net.ParseIP(host))
	dns.setSRV("_gossip._udp.wizard.test.", srvRec{"node.wizard.test.", uint16(px)})
	n := startMember(t, "dnsre-n", swim.WithResolver(dns.resolver()), swim.WithDNSSeeds("_gossip._udp.wizard.test"))
	ms := []*member{x, y, n}
	t.Cleanup(func() { closeAll(ms) })
	testwait.Until(t, "n did not join x", func() bool { return merged([]*member{x, n}) })
	dns.setSRV("_gossip._udp.wizard.test.", srvRec{"node.wizard.test.", uint16(py)})
	took := testwait.Within(t, testwait.Guard, "n never joined the seed's new address", func() bool { return merged(ms) })
	if limit := 10 * time.Second; took > limit {
		t.Errorf("merged %v after the record changed, over %v", round(took), limit)
	}
	t.Logf("merged %v after the record changed", round(took))
}

// lanQuick is the LAN preset with failure detection and forgetting the
// dead shortened, and reconnects every second, so that a partition splits
// and heals a cluster in a few seconds.
func lanQuick() []swim.Option {
	return []swim.Option{
		swim.WithPreset(swim.LAN),
		swim.WithMemberlistConfig(func(c *memberlist.Config) {
			c.ProbeInterval = 200 * time.Millisecond
			c.ProbeTimeout = 100 * time.Millisecond
			c.SuspicionMaxTimeoutMult = 1
			c.GossipToTheDeadTime = time.Second
		}),
		swim.WithReconnect(time.Second, 0),
	}
}

// TestMeasureRemerge measures how long after a partition heals every
// member sees every other and routes to it (WIZARD_LONG=1), with each
// preset: five nodes split 3/2, and two nodes whose seeds are not given
// again (only reconnects heal them), partitioned until each side has
// declared the other dead and memberlist has forgotten it
// (GossipToTheDeadTime: 3 s with Fast, 30 s with LAN), then healed. The
// targets are 10 s (Fast) and 60 s (LAN). The Fast trials run one after
// the other, the LAN ones (a partition of about a minute each) in
// parallel: give -parallel room for them.
//
//	WIZARD_LONG=1 go test -run TestMeasureRemerge -parallel 20 -v ./runtime/swim/
func TestMeasureRemerge(t *testing.T) {
	long(t)
	leak.Check(t)
	const trials = 8
	limit := map[swim.Preset]time.Duration{swim.Fast: 10 * time.Second, swim.LAN: 60 * time.Second}
	type key struct {
		p    swim.Preset
		what string
	}
	var mu sync.Mutex
	took := map[key][]time.Duration{}
	clusters := []struct {
		what  string
		start func(t *testing.T, prefix string, p swim.Preset) (a, b []*member)
	}{
		{"5 nodes split 3/2", func(t *testing.T, prefix string, p swim.Preset) (a, b []*member) {
			ms := startCluster(t, prefix, 5, swim.WithPreset(p))
			return ms[:3], ms[3:]
		}},
		{"2 nodes, reconnects only", func(t *testing.T, prefix string, p swim.Preset) (a, b []*member) {
			x := startMember(t, prefix+"a", swim.WithPreset(p))
			y := startMember(t, prefix+"b", swim.WithPreset(p), onceSeed(x.d.GossipAddr()))
			t.Cleanup(func() { closeAll([]*member{x, y}) })
			return []*member{x}, []*member{y}
		}},
	}
	for _, p := range []swim.Preset{swim.Fast, swim.LAN} {
		t.Run(p.String(), func(t *testing.T) {
			for ci, c := range clusters {
				for i := range trials {
					t.Run(fmt.Sprintf("%s/%d", c.what, i), func(t *testing.T) {
						if p == swim.LAN {
							t.Parallel()
						}
						a, b := c.start(t, fmt.Sprintf("%v%d-%d-", p, ci, i), p)
						d := splitAndHeal(t, true, 0, limit[p], a, b)
						t.Logf("merged %v after the heal", round(d))
						mu.Lock()
						took[key{p, c.what}] = append(took[key{p, c.what}], d)
						mu.Unlock()
					})
				}
			}
		})
	}
	for _, p := range []swim.Preset{swim.Fast, swim.LAN} {
		for _, c := range clusters {
			if ds := took[key{p, c.what}]; len(ds) > 0 {
				t.Logf("%v, %s: merged after the heal in median %v, max %v over %d trials (target %v)", p, c.what, round(medianOf(ds)), round(maxOf(ds)), len(ds), limit[p])
			}
		}
	}
}
