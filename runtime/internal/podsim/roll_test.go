//go:build linux

package podsim_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/faultnet"
)

// step is one step of a rolling update, for the figures.
type step struct {
	newPod, oldPod string
	up             time.Duration // the new pod's start to its line that it serves
	upAt           time.Time
	ready          time.Duration // the new pod's start to its first passed probe
	readyAt        time.Time
	deletion
	total time.Duration // the new pod's start to the old pod gone
}

// TestRollingUpdate rolls a Deployment of 5 server pods (maxSurge 1,
// maxUnavailable 0) under the caller's steady load, f.rolls times, and
// holds the targets of the package doc.
func TestRollingUpdate(t *testing.T) {
	f := gate(t)
	faultnet.Require(t)
	t.Run("replicas=5", func(t *testing.T) { rollScenario(t, f, 5, f.preStop, probePeriod) })
	if f.name == longForm.name {
		// One replica, no preStop sleep and a probe every 50 ms, the
		// kubelet's worst timing: an old pod gets SIGTERM as soon as its
		// successor's /readyz answers 200, so a node that reports ready
		// before the callers route to it would fail calls.
		t.Run("replicas=1,preStop=0,probe=50ms", func(t *testing.T) { rollScenario(t, f, 1, 0, 50*time.Millisecond) })
	}
}

// rollScenario rolls a Deployment of replicas pods f.rolls times, each
// deleted pod with a preStop sleep of preStop, the new pods probed every
// probe.
func rollScenario(t *testing.T, f form, replicas int, preStop, probe time.Duration) {
	s := newSim(t, 2+replicas*(f.rolls+1))
	s.probe = probe
	var live []*pod // the Deployment's pods, oldest first
	for i := range replicas {
		live = append(live, s.startPod(fmt.Sprintf("math-0-%d", i)))
	}
	for _, p := range live {
		s.waitReady(p)
	}
	s.startCaller(replicas)
	phase(f.warm)
	var steps []step
	for roll := 1; roll <= f.rolls; roll++ {
		for i := range replicas {
			begin := time.Now()
			p := s.startPod(fmt.Sprintf("math-%d-%d", roll, i))
			st := step{newPod: p.name, oldPod: live[0].name, ready: s.waitReady(p)}
			s.mu.Lock()
			st.readyAt, st.upAt, st.up = p.readyAt, p.up, p.up.Sub(p.started)
			s.mu.Unlock()
			st.deletion = s.deletePod(live[0], preStop)
			st.total = time.Since(begin)
			live = append(live[1:], p)
			steps = append(steps, st)
		}
	}
	phase(f.warm)
	r := s.stopCaller()
	execs := s.executions()

	t.Logf("form %s: %d replicas, %d roll(s), preStop %s, probes every %s, DNS publishNotReadyAddresses=%v", f.name, replicas, f.rolls, preStop, probe, publishNotReadyAddresses)
	// unrouted counts the steps whose old pod got SIGTERM before the
	// caller had a call answered by the new one: readiness (the node
	// serves) came before the caller's routing (gossip) caught up.
	unrouted := 0
	for _, st := range steps {
		first, last := "never", "never"
		if at, ok := r.FirstOK[st.newPod]; ok {
			first = seconds(time.Unix(0, at).Sub(st.upAt))
			if time.Unix(0, at).After(st.sigterm) {
				unrouted++
			}
		} else {
			unrouted++
		}
		if at, ok := r.LastOK[st.oldPod]; ok {
			last = seconds(time.Unix(0, at).Sub(st.sigterm))
		}
		t.Logf("step %s → %s: serving after %s, ready (probe) after %s, first call answered %s after serving; %s drained in %s (last call answered %s after SIGTERM, exit %s); step %s",
			st.oldPod, st.newPod, seconds(st.up), seconds(st.ready), first, st.oldPod, seconds(st.drained), last, exitStatus(st.exitErr), seconds(st.total))
		if st.killed {
			t.Errorf("pod %s was killed at the end of its %s grace period", st.oldPod, gracePeriod)
		} else if st.exitErr != nil {
			t.Errorf("pod %s exited with %v; its log:\n%s", st.oldPod, st.exitErr, s.log(st.oldPod))
		}
	}
	t.Logf("steps whose old pod got SIGTERM before the new pod answered a call: %d of %d", unrouted, len(steps))
	checkLoad(t, s, r, execs, false)
}

// checkLoad logs the caller's counts and failures and holds the targets:
// some load, no failed idempotent call, no not_found, no non-idempotent
// key run twice, no ok call whose key no pod ran, and, unless onceMayFail
// (pods killed outright), no failed non-idempotent call. On failure it
// logs every process's log.
func checkLoad(t *testing.T, s *sim, r callerReport, execs map[string]int, onceMayFail bool) {
	t.Helper()
	for kind := range 2 {
		t.Logf("%s calls: %d ok, %d failed %s", kindNames[kind], r.OK[kind], r.Failed[kind], codes(r.Errors[kind]))
	}
	for _, fl := range r.Failures {
		t.Logf("failed %s call %q: began +%s, ended +%s: %s: %s", kindNames[fl.Kind], fl.Key,
			seconds(time.Unix(0, fl.Began).Sub(time.Unix(0, r.Start))), seconds(time.Unix(0, fl.Ended).Sub(time.Unix(0, r.Start))), fl.Code, fl.Err)
	}

	if r.OK[idem] == 0 || r.OK[once] == 0 {
		t.Errorf("no load: %d idempotent and %d non-idempotent calls ok", r.OK[idem], r.OK[once])
	}
	if r.Failed[idem] != 0 {
		t.Errorf("%d of %d idempotent calls failed %s; want 0", r.Failed[idem], r.OK[idem]+r.Failed[idem], codes(r.Errors[idem]))
	}
	if r.Failed[once] != 0 && !onceMayFail {
		t.Errorf("%d of %d non-idempotent calls failed %s; want 0", r.Failed[once], r.OK[once]+r.Failed[once], codes(r.Errors[once]))
	}
	if n := r.Errors[idem]["not_found"] + r.Errors[once]["not_found"]; n != 0 {
		t.Errorf("%d calls failed not_found during the roll; want 0", n)
	}
	var twice []string
	for key, n := range execs {
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s ×%d", key, n))
		}
	}
	slices.Sort(twice)
	if len(twice) > 0 {
		t.Errorf("%d non-idempotent keys run more than once: %s", len(twice), strings.Join(twice[:min(len(twice), 20)], ", "))
	}
	unrun := 0
	for _, key := range r.OKKeys {
		if execs[key] == 0 {
			unrun++
		}
	}
	if unrun > 0 {
		t.Errorf("%d non-idempotent calls answered ok that no pod ran", unrun)
	}
	if r.Failed[once] > 0 {
		kept, ran := 0, 0
		for _, fl := range r.Failures {
			if fl.Kind == once {
				kept++
				if execs[fl.Key] > 0 {
					ran++
				}
			}
		}
		t.Logf("failed non-idempotent calls that a pod ran all the same (it died before it answered): %d of the %d kept", ran, kept)
	}
	t.Logf("non-idempotent keys run: %d distinct, %d run twice; ok calls no pod ran: %d", len(execs), len(twice), unrun)
	if t.Failed() {
		for _, name := range append([]string{"cluster", "caller"}, slices.Sorted(maps.Keys(s.pods))...) {
			if l := s.log(name); l != "" {
				t.Logf("%s's log:\n%s", name, l)
			}
		}
	}
}

// codes lists errors by code, "(code: n, …)", or "".
func codes(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", c, m[c]))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func exitStatus(err error) string {
	if err == nil {
		return "0"
	}
	return err.Error()
}
