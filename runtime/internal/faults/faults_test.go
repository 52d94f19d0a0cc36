//go:build linux

package faults_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/faultnet"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

// routeBound is the route-around target after a partition or a crash.
const routeBound = 2 * time.Second

// healBound is how soon after a heal every member must see every other
// and the healed server serve again: 10 s with swim.Fast, 60 s with
// swim.LAN; 10 s with StaticPeers (no gossip to wait for: a reconnect).
func healBound(v variant) time.Duration {
	if v.gossip && !v.fast {
		return 60 * time.Second
	}
	return 10 * time.Second
}

// TestFaults runs the scenarios of issue 12 and reports their figures
// against the targets (see the package doc).
func TestFaults(t *testing.T) {
	f := gate(t)
	faultnet.Require(t)
	for _, v := range f.variants {
		t.Run("loss5%/"+v.name, func(t *testing.T) { lossScenario(t, f, v, 0.05) })
		t.Run("loss20%/"+v.name, func(t *testing.T) { lossScenario(t, f, v, 0.20) })
		t.Run("delay/"+v.name, func(t *testing.T) { delayScenario(t, f, v) })
		t.Run("partition/"+v.name, func(t *testing.T) { partitionScenario(t, f, v, false) })
		t.Run("one-way/"+v.name, func(t *testing.T) { partitionScenario(t, f, v, true) })
		t.Run("kill-9/"+v.name, func(t *testing.T) { killScenario(t, f, v) })
	}
	for _, v := range f.healVariants {
		t.Run("partition/"+v.name, func(t *testing.T) { partitionScenario(t, f, v, false) })
		t.Run("kill-9/"+v.name, func(t *testing.T) { killScenario(t, f, v) })
	}
	t.Run("split/"+gossipFast.name, func(t *testing.T) { splitScenario(t, f, gossipFast) })
	t.Run("split/"+gossipLAN.name, func(t *testing.T) { splitScenario(t, f, gossipLAN) })
	t.Run("gossip-loss/"+gossipLAN.name, func(t *testing.T) { gossipLossScenario(t, f) })
}

// calls records what every scenario reports: calls run twice (always a
// bug), ok calls no server ran, and the failed calls; failed idempotent
// calls have a target of 0 when another server could always answer.
func (s *scenario) calls(r *results, otherCouldAnswer bool) {
	doubled := r.doubled()
	s.target("non-idempotent keys run twice", fmt.Sprint(doubled), "0", doubled == 0)
	unexec := r.unexecuted()
	s.target("non-idempotent calls ok that no server ran", fmt.Sprint(unexec), "0", unexec == 0)
	okOnce, failedOnce := r.totals(once)
	s.info("non-idempotent calls: ok / failed / distinct keys run", fmt.Sprintf("%d / %d / %d", okOnce, failedOnce, len(r.execs)))
	okIdem, failedIdem := r.totals(idem)
	value := fmt.Sprintf("%d of %d", failedIdem, okIdem+failedIdem)
	if otherCouldAnswer {
		s.target("failed idempotent calls", value, "0", failedIdem == 0)
	} else {
		s.info("failed idempotent calls", value)
	}
	var idemRuns int64
	for _, run := range r.runs {
		idemRuns += run.Idem
	}
	s.info("idempotent executions / ok calls (servers that exited cleanly)", fmt.Sprintf("%d / %d", idemRuns, okIdem))
	s.info("errors", r.errorSummary())
}

// routed records the route-around time of a fault from f0 to f1.
func (s *scenario) routed(m *mesh, r *results, f0, f1 time.Time) {
	d, ok := r.routeAround(m.at(f0), m.at(f1))
	value := seconds(d)
	if !ok {
		value = fmt.Sprintf("not within the %s fault", seconds(f1.Sub(f0)))
	}
	s.target("time to route around", value, "≤ "+seconds(routeBound), ok && d <= routeBound)
}

// served records how soon after a heal (or restart) at since server id
// answered calls again.
func (s *scenario) served(id string, d time.Duration, ok bool, bound time.Duration) {
	value := seconds(d)
	if !ok {
		value = "not within " + seconds(bound)
	}
	s.target(id+" serves again after the heal", value, "≤ "+seconds(bound), ok)
}

// from sets rule on every direction from host to any other host.
func from(hub *faultnet.Hub, host *faultnet.Host, r faultnet.Rule) {
	for _, o := range hub.Hosts() {
		if o != host {
			hub.Set(host, o, r)
		}
	}
}

// lossScenario: loss on every link of s2, both ways, for f.loss.
func lossScenario(t *testing.T, f form, v variant, loss float64) {
	s := newScenario(t, fmt.Sprintf("%.0f%% loss on one of two servers, %s, %s", loss*100, seconds(f.loss), v.name))
	m := newMesh(t, 2, v)
	s2 := m.server("s2")
	phase(f.warm)
	f0 := time.Now()
	for _, o := range m.hub.Hosts() {
		if o != s2.host {
			m.hub.SetBoth(s2.host, o, faultnet.Rule{Loss: loss})
		}
	}
	phase(f.loss)
	f1 := time.Now()
	m.hub.Heal()
	phase(time.Second)
	r := m.stop()
	s.calls(r, true)
	s.info("ok calls/s before → during the loss", fmt.Sprintf("%.0f → %.0f", r.okRate(window, m.at(f0)), r.okRate(m.at(f0), m.at(f1))))
	s.info("s2's share of ok calls during the loss", share(r, "s2", m.at(f0), m.at(f1)))
}

func share(r *results, id string, from, to int) string {
	all := r.okRate(from, to) * float64(to-from) * bucket.Seconds()
	if all == 0 {
		return "no calls"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(r.servedBy(id, from, to))/all)
}

// delayScenario: a healthy phase, then 50 ms ± 20 ms on every packet s1
// sends (its egress, as netem on its interface would add); the
// throughput of the two phases, each without its first second.
func delayScenario(t *testing.T, f form, v variant) {
	s := newScenario(t, fmt.Sprintf("50 ms ± 20 ms delay on one of two servers, %s, %s", seconds(f.delay), v.name))
	m := newMesh(t, 2, v)
	phase(f.warm)
	h0 := time.Now()
	phase(f.delay)
	f0 := time.Now()
	from(m.hub, m.server("s1").host, faultnet.Rule{Delay: 50 * time.Millisecond, Jitter: 20 * time.Millisecond})
	phase(f.delay)
	f1 := time.Now()
	m.hub.Heal()
	r := m.stop()
	s.calls(r, true)
	healthy := r.okRate(m.at(h0)+window, m.at(f0))
	delayed := r.okRate(m.at(f0)+window, m.at(f1))
	ratio := 0.0
	if healthy > 0 {
		ratio = delayed / healthy
	}
	s.info("ok calls/s healthy → delayed", fmt.Sprintf("%.0f → %.0f", healthy, delayed))
	s.target("throughput with the delay / healthy", fmt.Sprintf("%.2fx", ratio), "≥ 0.80x", ratio >= 0.8)
	s.info("s1's share of ok calls healthy → delayed", share(r, "s1", m.at(h0)+window, m.at(f0))+" → "+share(r, "s1", m.at(f0)+window, m.at(f1)))
}

// partitionScenario: s2 cut off from every host for f.partition (or,
// oneWay, only what s2 sends is dropped: requests reach it, nothing
// comes back), then healed.
func partitionScenario(t *testing.T, f form, v variant, oneWay bool) {
	what := "full partition of one of two servers"
	if oneWay {
		what = "one-way partition (s2's packets dropped) of one of two servers"
	}
	s := newScenario(t, fmt.Sprintf("%s, %s, %s", what, seconds(f.partition), v.name))
	m := newMesh(t, 2, v)
	s2 := m.server("s2")
	phase(f.warm)
	f0 := time.Now()
	if oneWay {
		from(m.hub, s2.host, faultnet.Rule{Drop: true})
	} else {
		m.hub.Isolate(s2.host)
	}
	phase(f.partition)
	f1 := time.Now()
	m.hub.Heal()
	bound := healBound(v)
	var md time.Duration
	var mok bool
	if v.gossip {
		md, mok = m.merged(f1, bound)
	}
	d, ok := m.servedAgain("s2", f1, bound)
	phase(time.Second)
	end := time.Now()
	r := m.stop()
	r.timeline(t.Logf, m.at(f0))
	s.calls(r, true)
	s.routed(m, r, f0, f1)
	if v.gossip {
		s.merge(md, mok, bound)
		s.afterHeal(m, f1, end)
	}
	s.served("s2", d, ok, bound)
}

// afterHeal records the members dropped from a node's view after the
// heal, when every node could reach every other: false deaths.
func (s *scenario) afterHeal(m *mesh, healed, end time.Time) {
	deaths, _, detail := m.deaths(healed, end)
	s.info("members dropped from a view after the heal", fmt.Sprint(deaths))
	for _, d := range detail {
		s.t.Log(d)
	}
}

// merge records how soon after a heal every member saw every other.
func (s *scenario) merge(d time.Duration, ok bool, bound time.Duration) {
	value := seconds(d)
	if !ok {
		value = "not within " + seconds(bound)
	}
	s.target("every member sees every other after the heal", value, "≤ "+seconds(bound), ok)
}

// killScenario: kill -9 of s2, restarted on its address after f.down.
func killScenario(t *testing.T, f form, v variant) {
	s := newScenario(t, fmt.Sprintf("kill -9 of one of two servers, restart after %s on the same address, %s", seconds(f.down), v.name))
	m := newMesh(t, 2, v)
	s2 := m.server("s2")
	phase(f.warm)
	f0 := time.Now()
	m.signal(s2, syscall.SIGKILL)
	phase(f.down)
	f1 := time.Now()
	m.start(s2)
	testwait.Recv(t, s2.ready)
	bound := healBound(v)
	d, ok := m.servedAgain("s2", f1, bound)
	phase(time.Second)
	r := m.stop()
	r.timeline(t.Logf, m.at(f0))
	s.calls(r, true)
	s.routed(m, r, f0, f1)
	s.served("s2", d, ok, bound)
}

// splitScenario: a caller and four servers gossiping, split into
// {caller, s1, s2} and {s3, s4} for f.split, then healed.
func splitScenario(t *testing.T, f form, v variant) {
	s := newScenario(t, fmt.Sprintf("5-node gossip mesh split 3/2 for %s, %s", seconds(f.split), v.name))
	m := newMesh(t, 4, v)
	h := m.hub.Hosts()
	phase(f.warm)
	f0 := time.Now()
	m.hub.Partition(h[:3], h[3:])
	phase(f.split)
	f1 := time.Now()
	m.hub.Heal()
	bound := healBound(v)
	md, mok := m.merged(f1, bound)
	d3, ok3 := m.servedAgain("s3", f1, bound)
	d4, ok4 := m.servedAgain("s4", f1, bound)
	phase(time.Second)
	end := time.Now()
	r := m.stop()
	r.timeline(t.Logf, m.at(f0))
	s.calls(r, true)
	s.routed(m, r, f0, f1)
	s.merge(md, mok, bound)
	s.afterHeal(m, f1, end)
	s.served("s3", d3, ok3, bound)
	s.served("s4", d4, ok4, bound)
	views(t, m)
}

// views logs each node's last view of the members.
func views(t *testing.T, m *mesh) {
	for _, p := range append([]*proc{m.caller}, m.servers...) {
		p.mu.Lock()
		if n := len(p.views); n > 0 {
			t.Logf("%s sees %s (suspects %v)", p.spec.ID, strings.Join(p.views[n-1].view, ","), p.views[n-1].suspect)
		}
		p.mu.Unlock()
	}
}

// gossipLossScenario: a caller and four servers gossiping with the
// default preset (LAN), 10% loss on every direction of every link for
// f.lossy; every member vanishing from a node's view is a false death.
func gossipLossScenario(t *testing.T, f form) {
	s := newScenario(t, fmt.Sprintf("gossip under 10%% loss on every link for %s, 5 nodes, %s", seconds(f.lossy), gossipLAN.name))
	m := newMesh(t, 4, gossipLAN)
	phase(f.warm)
	f0 := time.Now()
	m.hub.SetAll(faultnet.Rule{Loss: 0.1})
	phase(f.lossy)
	f1 := time.Now()
	m.hub.Heal()
	phase(time.Second)
	deaths, suspicions, detail := m.deaths(f0, f1.Add(time.Second))
	r := m.stop()
	s.calls(r, true)
	if f.lossy >= time.Minute {
		s.target("false deaths (members dropped from a node's view)", fmt.Sprint(deaths), "0", deaths == 0)
	} else {
		// A false death under 10% loss comes now and then (3 members
		// dropped in about 400 s of it over 12 runs, most with none): a
		// short run cannot tell a regression from luck, and would fail
		// CI at random. It reports the count; the long form's 60 s holds
		// the target.
		s.info("false deaths (members dropped from a node's view; the target is the long form's)", fmt.Sprint(deaths))
	}
	s.info("suspicions raised", fmt.Sprint(suspicions))
	s.info("ok calls/s before → during the loss", fmt.Sprintf("%.0f → %.0f", r.okRate(window, m.at(f0)), r.okRate(m.at(f0), m.at(f1))))
	for _, d := range detail {
		t.Log(d)
	}
}
