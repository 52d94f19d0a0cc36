package swim_test

import (
	"context"
	"encoding/binary"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/swim"
)

// dnsServer is a minimal DNS server on loopback UDP for the resolver
// tests: it answers A and SRV questions from its tables, AAAA with no
// records, and anything else with NXDOMAIN.
type dnsServer struct {
	conn net.PacketConn
	mu   sync.Mutex
	a    map[string]net.IP   // name (lower case, with the final dot) → IPv4
	srv  map[string][]srvRec // name → records
	wg   sync.WaitGroup
}

type srvRec struct {
	target string
	port   uint16
}

func startDNS(t *testing.T) *dnsServer {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dnsServer{conn: c, a: map[string]net.IP{}, srv: map[string][]srvRec{}}
	s.wg.Go(s.serve)
	t.Cleanup(func() { c.Close(); s.wg.Wait() })
	return s
}

// resolver returns a resolver that asks only s.
func (s *dnsServer) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", s.conn.LocalAddr().String())
	}}
}

func (s *dnsServer) setA(name string, ip net.IP) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.a[strings.ToLower(name)] = ip.To4()
}

func (s *dnsServer) setSRV(name string, recs ...srvRec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srv[strings.ToLower(name)] = recs
}

func (s *dnsServer) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if reply := s.answer(buf[:n]); reply != nil {
			s.conn.WriteTo(reply, from)
		}
	}
}

// answer builds the reply to query q, or nil for a query it cannot parse.
func (s *dnsServer) answer(q []byte) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:]) != 1 {
		return nil
	}
	var labels []string
	i := 12
	for {
		if i >= len(q) {
			return nil
		}
		l := int(q[i])
		i++
		if l == 0 {
			break
		}
		if l > 63 || i+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[i:i+l]))
		i += l
	}
	if i+4 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i:])
	question := q[12 : i+4]
	name := strings.ToLower(strings.Join(labels, ".") + ".")

	s.mu.Lock()
	defer s.mu.Unlock()
	type rr struct {
		typ  uint16
		data []byte
	}
	var answers []rr
	rcode := byte(0)
	switch ip, srv := s.a[name], s.srv[name]; {
	case qtype == 1 && ip != nil: // A
		answers = append(answers, rr{1, ip})
	case qtype == 33 && srv != nil: // SRV
		for _, r := range srv {
			d := binary.BigEndian.AppendUint16(nil, 0) // priority
			d = binary.BigEndian.AppendUint16(d, 0)    // weight
			d = binary.BigEndian.AppendUint16(d, r.port)
			for _, l := range strings.Split(strings.TrimSuffix(r.target, "."), ".") {
				d = append(d, byte(len(l)))
				d = append(d, l...)
			}
			d = append(d, 0)
			answers = append(answers, rr{33, d})
		}
	case ip != nil || srv != nil: // the name exists, without records of this type
	default:
		rcode = 3 // NXDOMAIN
	}
	out := make([]byte, 12, 512)
	copy(out, q[:2])                       // id
	out[2] = 0x84 | q[2]&0x01              // response, authoritative, recursion desired as asked
	out[3] = 0x80 | rcode                  // recursion available
	binary.BigEndian.PutUint16(out[4:], 1) // questions
	binary.BigEndian.PutUint16(out[6:], uint16(len(answers)))
	out = append(out, question...)
	for _, a := range answers {
		out = append(out, 0xc0, 12) // the question's name
		out = binary.BigEndian.AppendUint16(out, a.typ)
		out = binary.BigEndian.AppendUint16(out, 1) // IN
		out = binary.BigEndian.AppendUint32(out, 5) // TTL
		out = binary.BigEndian.AppendUint16(out, uint16(len(a.data)))
		out = append(out, a.data...)
	}
	return out
}

// TestDNSSeeds joins nodes through DNS: one by a name with A records and
// a port, one by an SRV name (as a Kubernetes headless service gives),
// both answered by a DNS server the test runs.
func TestDNSSeeds(t *testing.T) {
	leak.Check(t)
	dns := startDNS(t)
	first := startMember(t, "dns0")
	host, port, _ := net.SplitHostPort(first.d.GossipAddr())
	p, _ := strconv.Atoi(port)
	dns.setA("seeds.wizard.test.", net.ParseIP(host))
	dns.setA("dns0.wizard.test.", net.ParseIP(host))
	dns.setSRV("_gossip._udp.wizard.test.", srvRec{"dns0.wizard.test.", uint16(p)})

	byA := startMember(t, "dns1", swim.WithResolver(dns.resolver()), swim.WithDNSSeeds("seeds.wizard.test:"+port))
	bySRV := startMember(t, "dns2", swim.WithResolver(dns.resolver()), swim.WithDNSSeeds("_gossip._udp.wizard.test"))
	all := []*member{first, byA, bySRV}
	t.Cleanup(func() { closeAll(all) })
	for _, m := range all {
		waitRoutable(t, all, m.pattern())
	}
}

// TestJoinRetry starts a node whose only seed is not up yet: it retries
// until the seed comes up, and then joins it.
func TestJoinRetry(t *testing.T) {
	leak.Check(t)
	// A port nothing listens on, for the seed to take later.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	early := startMember(t, "early", swim.WithSeeds(addr))
	testwait.Until(t, "no second join attempt", func() bool { return early.d.JoinAttempts() >= 2 })
	seed := startMember(t, "seed", swim.WithBindAddr(addr))
	all := []*member{early, seed}
	t.Cleanup(func() { closeAll(all) })
	waitRoutable(t, all, early.pattern(), seed.pattern())
}

// TestSeedFunc joins through a seed function, which fails until the seed
// is known.
func TestSeedFunc(t *testing.T) {
	leak.Check(t)
	var mu sync.Mutex
	var seedAddr string
	calls := 0
	f := func(ctx context.Context) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if seedAddr == "" {
			return nil, context.DeadlineExceeded
		}
		return []string{seedAddr}, nil
	}
	early := startMember(t, "early", swim.WithSeedFunc(f))
	testwait.Until(t, "the seed function was not called again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls >= 2
	})
	seed := startMember(t, "seed")
	mu.Lock()
	seedAddr = seed.d.GossipAddr()
	mu.Unlock()
	all := []*member{early, seed}
	t.Cleanup(func() { closeAll(all) })
	waitRoutable(t, all, early.pattern(), seed.pattern())
}

// TestJoinPastAFreshSeed starts a node whose first seed is a node as new
// as itself, alone so far (as a headless Service lists the pods of a
// scale-up before they have joined anything), and whose second seed is a
// member of the cluster. Re-joins are off: the node must reach the
// cluster through its first join, not be left in a cluster of two with
// the fresh seed until a re-join.
func TestJoinPastAFreshSeed(t *testing.T) {
	leak.Check(t)
	off := swim.WithReconnect(-1, 0)
	cluster := startCluster(t, "main", 2, off)
	fresh := startMember(t, "fresh", off) // no seeds: the first of its own cluster
	joiner := startMember(t, "joiner", off, swim.WithSeeds(fresh.d.GossipAddr(), cluster[0].d.GossipAddr()))
	all := append(cluster, fresh, joiner)
	t.Cleanup(func() { closeAll(all) })
	waitRoutable(t, cluster, joiner.pattern(), fresh.pattern())
}
