package swim_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/introspect"
	"github.com/wizardmesh/wizard/runtime/pattern"
	"github.com/wizardmesh/wizard/runtime/swim"
)

// longRun says whether the long forms run: WIZARD_LONG=1, without the
// race detector (it slows gossip too much for 50 nodes with Fast timings
// in one process).
func longRun() bool { return os.Getenv("WIZARD_LONG") == "1" && !raceEnabled }

// long skips t unless the long forms run.
func long(t *testing.T) {
	t.Helper()
	if !longRun() {
		t.Skip("set WIZARD_LONG=1 and run without -race")
	}
}

// clusterSize is 10, or 50 in the long form.
func clusterSize() int {
	if longRun() {
		return 50
	}
	return 10
}

// routes says whether n's routing holds pattern p (local or remote).
func routes(n *runtime.Node, p pattern.Pattern) bool {
	return slices.ContainsFunc(n.Patterns(), func(i introspect.PatternInfo) bool { return i.Pattern.Equal(p) })
}

// routesTo says whether n routes pattern p to the peer id.
func routesTo(n *runtime.Node, p pattern.Pattern, id string) bool {
	return slices.ContainsFunc(n.Patterns(), func(i introspect.PatternInfo) bool {
		return i.Pattern.Equal(p) && slices.Contains(i.Remote, id)
	})
}

// untilAll polls every node of ms until cond holds for it and returns
// how long each took, from start.
func untilAll(t *testing.T, ms []*member, start time.Time, cond func(*member) bool) []time.Duration {
	t.Helper()
	took := make([]time.Duration, len(ms))
	done := make([]bool, len(ms))
	left := len(ms)
	for left > 0 {
		if time.Since(start) > testwait.Guard {
			t.Fatalf("%d of %d nodes still waiting after %v", left, len(ms), testwait.Guard)
		}
		for i, m := range ms {
			if !done[i] && cond(m) {
				done[i], took[i] = true, time.Since(start)
				left--
			}
		}
		time.Sleep(time.Millisecond) // a polling interval, not synchronisation
	}
	return took
}

func maxOf(ds []time.Duration) time.Duration { return slices.Max(ds) }

func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// TestMeasure is the measurement behind the discovery figures of docs/performance.md
// (WIZARD_LONG=1): on a 50-node in-process cluster with the Fast preset,
// (a) the time from a new node's start until its pattern is routable on
// all 50 members, (b) the time from a node's crash (gossip stopped without
// leaving; its transport still answers) until it is out of routing on all
// other members, against the preset's suspicion timeout, (c) the
// NodeMeta size of a node serving 500 patterns, and (d) the time from the
// start of a replica of a member (the same pattern set, whose catalog
// every member has cached: its own pull answers the digest alone) until
// every member routes to it.
//
//	WIZARD_LONG=1 go test -run TestMeasure -v ./runtime/swim/
func TestMeasure(t *testing.T) {
	long(t)
	const size, trials = 50, 5
	start := time.Now()
	ms := startCluster(t, "m", size)
	for _, m := range ms {
		waitRoutable(t, ms, m.pattern())
	}
	t.Logf("%d nodes started and every pattern routable everywhere in %v", size, round(time.Since(start)))
	var report strings.Builder

	// (a) A new node's pattern, routable on every member.
	var joins []time.Duration
	for i := range trials {
		id := fmt.Sprintf("new%d", i)
		p := pattern.MustParse(patternOf(id))
		start := time.Now()
		m := startMember(t, id, swim.WithSeeds(ms[i].d.GossipAddr()))
		took := untilAll(t, ms, start, func(o *member) bool { return routes(o.n, p) })
		joins = append(joins, maxOf(took))
		fmt.Fprintf(&report, "join %d: routable on all %d members after %v (median member %v)\n", i, len(ms), round(maxOf(took)), round(medianOf(took)))
		ms = append(ms, m)
	}

	// (d) A replica of ms[0], routed to on every member.
	var replicas []time.Duration
	p0 := pattern.MustParse(ms[0].pattern())
	for i := range trials {
		id := fmt.Sprintf("replica%d", i)
		start := time.Now()
		startServing(t, id, "127.0.0.1:0", ms[0].pattern(), swim.WithSeeds(ms[i+1].d.GossipAddr()))
		took := untilAll(t, ms, start, func(o *member) bool { return routesTo(o.n, p0, id) })
		replicas = append(replicas, maxOf(took))
		fmt.Fprintf(&report, "replica %d: routed to on all %d members after %v (median member %v)\n", i, len(ms), round(maxOf(took)), round(medianOf(took)))
	}

	// (b) A crashed node, out of routing on every other member.
	n := len(ms)
	nominal := swim.Fast.SuspicionTimeout(n)
	var crashes []time.Duration
	for i := range trials {
		victim := ms[len(ms)-1-i*7]
		rest := others(ms, victim)
		p := pattern.MustParse(victim.pattern())
		start := time.Now()
		victim.d.Crash()
		took := untilAll(t, rest, start, func(o *member) bool { return !routes(o.n, p) })
		crashes = append(crashes, maxOf(took))
		fmt.Fprintf(&report, "crash %d: out of routing on all %d others after %v (median member %v)\n", i, len(rest), round(maxOf(took)), round(medianOf(took)))
		victim.n.Close()
		ms = rest
	}

	// (c) NodeMeta with 500 patterns.
	big := startMember(t, "big", swim.WithSeeds(ms[0].d.GossipAddr()))
	for i := range 500 {
		if err := big.n.Add(fmt.Sprintf("role:inventory,cmd:operation%03d,region:eu-west-1,version:v2", i), func(context.Context, runtime.Request) (any, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
	}
	waitRoutable(t, ms[:1], "role:inventory,cmd:operation499,region:eu-west-1,version:v2")

	t.Logf("Fast preset, %d members:\n%s", n, report.String())
	t.Logf("(a) join → routable on all members: median %v, max %v over %d joins", round(medianOf(joins)), round(maxOf(joins)), trials)
	t.Logf("(b) crash → out of routing on all members: median %v, max %v over %d crashes; suspicion timeout %v nominal, %v at most (+1 s: %v)",
		round(medianOf(crashes)), round(maxOf(crashes)), trials, round(nominal), round(3*nominal), round(3*nominal+time.Second))
	t.Logf("(d) replica join → routed to on all members: median %v, max %v over %d replicas", round(medianOf(replicas)), round(maxOf(replicas)), trials)
	t.Logf("(c) NodeMeta of a node serving 500 patterns: %d bytes (memberlist's limit 512)", len(big.d.Meta()))
	if maxOf(crashes) > 3*nominal+time.Second {
		t.Errorf("a crashed node took %v to leave routing, over the suspicion timeout + 1 s (%v)", maxOf(crashes), 3*nominal+time.Second)
	}
}

// TestMetaSizeManyPatterns: a node serving 500 long patterns gossips a
// NodeMeta well under memberlist's 512-byte limit, carrying its digest;
// another node pulls all 500 over the catalog.
func TestMetaSizeManyPatterns(t *testing.T) {
	leak.Check(t)
	first := startMember(t, "few")
	big := startMember(t, "many", swim.WithSeeds(first.d.GossipAddr()))
	t.Cleanup(func() { closeAll([]*member{first, big}) })
	var last string
	for i := range 500 {
		last = fmt.Sprintf("role:inventory,cmd:operation%03d,region:eu-west-1,tenant:%s", i, strings.Repeat("t", 40))
		if err := big.n.Add(last, func(context.Context, runtime.Request) (any, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
	}
	waitRoutable(t, []*member{first}, last)
	want := big.n.Members()[0].Digest
	var meta []byte
	var addr, transport, digest string
	testwait.Until(t, "the last digest was not announced", func() bool {
		meta = big.d.Meta()
		var err error
		if _, addr, transport, _, digest, err = swim.DecodedMeta(meta); err != nil {
			t.Fatal(err)
		}
		return digest == want
	})
	if len(meta) > 512 {
		t.Fatalf("NodeMeta is %d bytes", len(meta))
	}
	if addr != big.n.Addr() || transport != "tcp" {
		t.Errorf("meta holds %q %q; the node is at %q", addr, transport, big.n.Addr())
	}
	t.Logf("NodeMeta with 500 patterns: %d bytes", len(meta))
}
