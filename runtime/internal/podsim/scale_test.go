//go:build linux

package podsim_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/faultnet"
)

// TestScale scales a Deployment of server pods 3 → 10 → 3 under the
// caller's steady load: 7 pods start at once and each becomes ready;
// then the 7 newest are deleted at once, as a ReplicaSet scaled down
// deletes the pods ready the shortest time: each its preStop sleep,
// SIGTERM, drain, exit. The targets are the rolling update's.
func TestScale(t *testing.T) {
	f := gate(t)
	faultnet.Require(t)
	const from, to = 3, 10
	s := newSim(t, 2+to)
	var live []*pod
	for i := range from {
		live = append(live, s.startPod(fmt.Sprintf("math-%d", i)))
	}
	for _, p := range live {
		s.waitReady(p)
	}
	s.startCaller(from)
	phase(f.warm)

	up := time.Now()
	var added []*pod
	for i := from; i < to; i++ {
		added = append(added, s.startPod(fmt.Sprintf("math-%d", i)))
	}
	var lastReady, lastServed time.Duration
	for _, p := range added {
		lastReady = max(lastReady, s.waitReady(p)+p.started.Sub(up))
	}
	for _, p := range added {
		lastServed = max(lastServed, s.waitServed(p).Sub(up))
	}
	t.Logf("scale %d → %d: the last of %d new pods ready %s after the scale-up, the last to answer a call %s after it", from, to, len(added), seconds(lastReady), seconds(lastServed))
	phase(f.warm)

	down := time.Now()
	slices.Reverse(added) // newest first: a ReplicaSet deletes the pods ready the shortest time first
	ds := s.deletePods(added, f.preStop)
	t.Logf("scale %d → %d: %d pods deleted at once (preStop %s), all gone %s after the scale-down", to, from, len(added), f.preStop, seconds(time.Since(down)))
	phase(f.warm)
	r := s.stopCaller()
	execs := s.executions()

	t.Logf("form %s: scale %d → %d → %d, probes every %s", f.name, from, to, from, s.probe)
	for i, p := range added {
		d := ds[i]
		first, last := "never", "never"
		if at, ok := r.FirstOK[p.name]; ok {
			first = seconds(time.Unix(0, at).Sub(up))
		}
		if at, ok := r.LastOK[p.name]; ok {
			last = seconds(time.Unix(0, at).Sub(d.sigterm))
		}
		s.mu.Lock()
		ready := p.readyAt.Sub(up)
		s.mu.Unlock()
		t.Logf("pod %s: ready %s after the scale-up, first call answered %s after the scale-up; drained in %s (last call answered %s after SIGTERM, exit %s)",
			p.name, seconds(ready), first, seconds(d.drained), last, exitStatus(d.exitErr))
		if d.killed {
			t.Errorf("pod %s was killed at the end of its %s grace period", p.name, gracePeriod)
		} else if d.exitErr != nil {
			t.Errorf("pod %s exited with %v; its log:\n%s", p.name, d.exitErr, s.log(p.name))
		}
	}
	checkLoad(t, s, r, execs, false)
}

// TestNodeLost kills two of 5 server pods at once under the caller's
// steady load, as losing their node does (SIGKILL: no preStop, no
// drain), then starts their two replacements; first with the kernel of
// the pods' hosts still there to reset their connections ("killed"),
// then with their hosts cut off the network before the kill, so that
// their packets go unanswered as a lost node's do ("unreachable").
// Idempotent calls must not fail (they are sent again to another pod);
// non-idempotent calls in flight on the killed pods may fail, and are
// counted by code: none may run twice, and no call answered ok may be
// one no pod ran.
func TestNodeLost(t *testing.T) {
	f := gate(t)
	faultnet.Require(t)
	t.Run("killed", func(t *testing.T) { nodeLostScenario(t, f, false) })
	t.Run("unreachable", func(t *testing.T) { nodeLostScenario(t, f, true) })
}

// nodeLostScenario is TestNodeLost's scenario; unreachable cuts the
// killed pods' hosts off the network first.
func nodeLostScenario(t *testing.T, f form, unreachable bool) {
	const replicas, lost = 5, 2
	s := newSim(t, 2+replicas+lost)
	var live []*pod
	for i := range replicas {
		live = append(live, s.startPod(fmt.Sprintf("math-%d", i)))
	}
	for _, p := range live {
		s.waitReady(p)
	}
	s.startCaller(replicas)
	phase(f.warm)

	killed := []*pod{live[1], live[3]}
	at := s.killPods(killed, unreachable)
	phase(f.warm)
	// The ReplicaSet replaces them.
	var repl []*pod
	for i := range lost {
		repl = append(repl, s.startPod(fmt.Sprintf("math-%d", replicas+i)))
	}
	for _, p := range repl {
		s.waitReady(p)
	}
	phase(f.warm)
	r := s.stopCaller()
	execs := s.executions()

	t.Logf("form %s: %d replicas, %d killed at once (SIGKILL; their hosts cut off first: %v), replaced after %s", f.name, replicas, lost, unreachable, f.warm)
	for _, p := range killed {
		last := "never"
		if lat, ok := r.LastOK[p.name]; ok {
			last = seconds(time.Unix(0, lat).Sub(at))
		}
		t.Logf("pod %s killed: its last call answered %s after the kill", p.name, last)
	}
	for _, p := range repl {
		first := "never"
		if fat, ok := r.FirstOK[p.name]; ok {
			first = seconds(time.Unix(0, fat).Sub(at))
		}
		t.Logf("pod %s (replacement): first call answered %s after the kill", p.name, first)
	}
	var lastFail time.Duration
	for _, fl := range r.Failures {
		lastFail = max(lastFail, time.Unix(0, fl.Ended).Sub(at))
	}
	if len(r.Failures) > 0 {
		t.Logf("failed calls ended up to %s after the kill", seconds(lastFail))
	}
	t.Logf("non-idempotent calls that failed when their pods were killed: %d %s", r.Failed[once], codes(r.Errors[once]))
	checkLoad(t, s, r, execs, true)
}
