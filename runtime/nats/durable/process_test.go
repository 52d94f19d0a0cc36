package durable

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/natstest"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

// jetStreamConf is a nats-server configuration with JetStream on, its
// file store in dir, and the rest.
func jetStreamConf(dir, rest string) string {
	return fmt.Sprintf("jetstream {\n  store_dir: %q\n}\n%s", dir, rest)
}

// emitting emits events "role:order,event:placed" with ids prefix0... on
// ev until stop is closed or n are emitted, each with a bound of its own,
// and returns the ids whose Emit succeeded and those whose Emit failed
// (the stream may hold them or not).
func emitting(ev *Events, prefix string, n int, stop <-chan struct{}) (ok, failed []string) {
	for i := range n {
		select {
		case <-stop:
			return ok, failed
		default:
		}
		id := fmt.Sprintf("%s%d", prefix, i)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := ev.Emit(ctx, "role:order,event:placed", map[string]any{"id": id})
		cancel()
		if err != nil {
			failed = append(failed, id)
		} else {
			ok = append(ok, id)
		}
	}
	return ok, failed
}

// checkOnce fails t unless every id of ids ran exactly once in each
// group, every id of maybe at most once, and nothing else ran.
func (ta *tally) checkOnce(t *testing.T, groups, ids, maybe []string) {
	t.Helper()
	ta.mu.Lock()
	defer ta.mu.Unlock()
	known := map[string]bool{}
	for _, id := range ids {
		known[id] = true
	}
	for _, id := range maybe {
		known[id] = true
	}
	for _, g := range groups {
		for _, id := range ids {
			if n := ta.runs[g][id]; n != 1 {
				t.Errorf("group %s ran event %s %d times, want once", g, id, n)
			}
		}
		for id, n := range ta.runs[g] {
			switch {
			case !known[id]:
				t.Errorf("group %s ran event %s, never emitted", g, id)
			case n > 1:
				t.Errorf("group %s ran event %s %d times, want at most once", g, id, n)
			}
		}
	}
}

// handledIn returns how many events group ran.
func (ta *tally) handledIn(group string) int {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	return len(ta.runs[group])
}

// TestBrokerRestart: a nats-server process with a file store is killed
// (SIGKILL) and started again while events are being handled and
// emitted; every event emitted without error is then handled exactly once
// in each group, and those whose Emit failed at most once. Skipped with
// -short.
func TestBrokerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("a nats-server process killed and restarted: skipped with -short")
	}
	p := natstest.StartProcess(t, jetStreamConf(filepath.Join(t.TempDir(), "js"), ""))
	urls := []string{p.URL()}
	ta := newTally()
	groups := []string{"billing", "shipping"}
	for _, g := range groups {
		for range 2 {
			m := newMember(t, urls, "orders")
			if err := m.ev.Subscribe(t.Context(), "role:order", g, counting(ta), AckWait(time.Second)); err != nil {
				t.Fatal(err)
			}
		}
	}
	em := newMember(t, urls, "orders")
	ids := emitN(t, em.ev, "a", 200)
	testwait.Until(t, "some events handled", func() bool { return ta.handledIn("billing") >= 20 })
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ok, failed []string
	wg.Go(func() { ok, failed = emitting(em.ev, "b", 200, stop) })
	p.Kill(syscall.SIGKILL)
	p.Restart()
	wg.Wait()
	close(stop)
	ids = append(ids, ok...)
	t.Logf("during the restart: %d emits succeeded, %d failed", len(ok), len(failed))
	testwait.Until(t, "every event emitted handled", func() bool { return ta.covered(groups, ids) })
	drained(t, em.ev, groups...)
	ta.checkOnce(t, groups, ids, failed)
}

// TestClusterLosesServer: a 3-server JetStream cluster (processes) holds
// the space with 3 replicas; one server is killed while events are
// handled and emitted; emits and deliveries go on through the other two,
// and every event emitted without error is handled exactly once in each
// group. Skipped with -short.
func TestClusterLosesServer(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3-server nats-server cluster: skipped with -short")
	}
	var ports, routePorts [3]int
	var routes []string
	for i := range ports {
		ports[i], routePorts[i] = natstest.FreePort(t), natstest.FreePort(t)
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", routePorts[i]))
	}
	var servers []*natstest.Process
	var urls []string
	for i, port := range ports {
		rest := fmt.Sprintf("server_name: s%d\ncluster {\n  name: wizard\n  listen: \"127.0.0.1:%d\"\n  routes: [%s]\n}\n",
			i, routePorts[i], `"`+strings.Join(routes, `", "`)+`"`)
		p := natstest.StartProcessOn(t, port, jetStreamConf(filepath.Join(t.TempDir(), "js"), rest))
		servers = append(servers, p)
		urls = append(urls, p.URL())
	}
	start := time.Now()
	ta := newTally()
	groups := []string{"billing", "shipping"}
	var members []*member
	for _, g := range groups {
		for range 2 {
			// The ack wait outlasts a leader's election: a claim is
			// taken for stale after two of them without renewal.
			m := newClusterMember(t, urls)
			if err := m.ev.Subscribe(t.Context(), "role:order", g, counting(ta), AckWait(3*time.Second)); err != nil {
				t.Fatal(err)
			}
			members = append(members, m)
		}
	}
	em := newClusterMember(t, urls)
	t.Logf("%v: the members subscribed", time.Since(start))
	ids := emitN(t, em.ev, "a", 100)
	testwait.Until(t, "some events handled", func() bool { return ta.handledIn("billing") >= 20 })
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ok, failed []string
	wg.Go(func() { ok, failed = emitting(em.ev, "b", 100, stop) })
	servers[0].Kill(syscall.SIGKILL)
	wg.Wait()
	close(stop)
	ids = append(ids, ok...)
	t.Logf("%v: with a server killed: %d emits succeeded, %d failed", time.Since(start), len(ok), len(failed))
	if len(ok) == 0 {
		t.Error("no emit succeeded once a server of three was killed")
	}
	testwait.Until(t, "every event emitted handled", func() bool { return ta.covered(groups, ids) })
	t.Logf("%v: every event handled", time.Since(start))
	drained(t, em.ev, groups...)
	ta.checkOnce(t, groups, ids, failed)
}

// newClusterMember is a member whose space has 3 replicas, made once the
// cluster has elected its JetStream leader.
func newClusterMember(t *testing.T, urls []string) *member {
	t.Helper()
	var m *member
	var last error
	// A cluster of processes started at once elects its JetStream
	// leader in seconds, and on a loaded machine in more than the usual
	// guard: this one is 2 minutes, and says why it waited.
	if !testwait.Poll(2*time.Minute, func() bool {
		m, last = tryMember(t, urls, "orders", WithReplicas(3))
		return last == nil
	}) {
		t.Fatalf("after 2m the JetStream cluster does not take the space: %v", last)
	}
	return m
}
