//go:build linux

package faults_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/faultnet"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

// mesh is a caller (host 0) and servers s1…sN (hosts 1…N), each a node
// process in its host, connected through a hub.
type mesh struct {
	t      *testing.T
	hub    *faultnet.Hub
	dir    string
	v      variant
	caller *proc
	// servers by id, s1 first.
	servers []*proc
}

// variant is how the nodes find each other.
type variant struct {
	name   string
	gossip bool
	fast   bool // swim.Fast, else the default swim.LAN
}

var (
	static     = variant{name: "StaticPeers"}
	gossipLAN  = variant{name: "gossip (LAN)", gossip: true}
	gossipFast = variant{name: "gossip (Fast)", gossip: true, fast: true}
)

// workers is the caller's number of workers of each kind.
const workers = 4

// proc is a node process and what it has printed.
type proc struct {
	spec nodeSpec
	host *faultnet.Host

	mu      sync.Mutex
	cmd     *exec.Cmd
	ready   chan struct{}
	exited  chan struct{}
	views   []viewAt       // gossip
	buckets []bucketCounts // caller, as it goes
	start   time.Time      // caller: bucket 0
}

// viewAt is what one node saw of the members from a time on.
type viewAt struct {
	at      time.Time
	view    []string
	suspect []string
}

// newMesh starts servers server processes and a caller with workers of
// each kind, and waits until the caller routes to every server and runs
// its load.
func newMesh(t *testing.T, servers int, v variant) *mesh {
	t.Helper()
	m := &mesh{t: t, hub: faultnet.New(t, servers+1), dir: t.TempDir(), v: v}
	var gossipAddrs, static []string
	for _, h := range m.hub.Hosts() {
		gossipAddrs = append(gossipAddrs, fmt.Sprintf("%s:%d", h.Addr, gossipPort))
	}
	for i := 1; i <= servers; i++ {
		h := m.hub.Host(i)
		static = append(static, fmt.Sprintf("%s:%d", h.Addr, transportPort))
		spec := nodeSpec{Role: "server", ID: fmt.Sprintf("s%d", i), IP: h.Addr.String(), Dir: m.dir, Gossip: v.gossip, Fast: v.fast}
		if v.gossip {
			spec.Seeds = others(gossipAddrs, i)
		}
		m.servers = append(m.servers, &proc{spec: spec, host: h})
	}
	for _, p := range m.servers {
		m.start(p)
	}
	for _, p := range m.servers {
		testwait.Recv(t, p.ready)
	}
	spec := nodeSpec{Role: "caller", ID: "caller", IP: m.hub.Host(0).Addr.String(), Dir: m.dir, Gossip: v.gossip, Fast: v.fast, Workers: workers, Servers: servers}
	if v.gossip {
		spec.Seeds = others(gossipAddrs, 0)
	} else {
		spec.Static = static
	}
	m.caller = &proc{spec: spec, host: m.hub.Host(0)}
	m.start(m.caller)
	select {
	case <-m.caller.ready:
	case <-time.After(90 * time.Second): // the caller gives up after a minute itself
		t.Fatalf("the caller did not get ready; its log:\n%s", m.log(m.caller))
	}
	return m
}

func others(addrs []string, i int) []string {
	return slices.Delete(slices.Clone(addrs), i, i+1)
}

// server returns server id ("s2").
func (m *mesh) server(id string) *proc {
	for _, p := range m.servers {
		if p.spec.ID == id {
			return p
		}
	}
	m.t.Fatalf("no server %s", id)
	return nil
}

// start starts p's process (again, after a kill) in its host.
func (m *mesh) start(p *proc) {
	m.t.Helper()
	spec, err := json.Marshal(p.spec)
	if err != nil {
		m.t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), roleEnv+"="+string(spec))
	stderr, err := os.OpenFile(filepath.Join(m.dir, p.spec.ID+".stderr"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		m.t.Fatal(err)
	}
	defer stderr.Close()
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		m.t.Fatal(err)
	}
	if err := m.hub.Start(p.host, cmd); err != nil {
		m.t.Fatal(err)
	}
	ready, exited := make(chan struct{}), make(chan struct{})
	p.mu.Lock()
	p.cmd, p.ready, p.exited = cmd, ready, exited
	p.mu.Unlock()
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		readyOnce := sync.OnceFunc(func() { close(ready) })
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			p.mu.Lock()
			switch {
			case e.Ready:
				if e.At != 0 {
					p.start = time.Unix(0, e.At)
				}
				readyOnce()
			case e.Bucket != nil:
				p.buckets = append(p.buckets, *e.Bucket)
			case e.At != 0:
				p.views = append(p.views, viewAt{at: time.Unix(0, e.At), view: e.View, suspect: e.Suspect})
			}
			p.mu.Unlock()
		}
		cmd.Wait()
	}()
}

// signal sends sig to p's process and waits until it exits.
func (m *mesh) signal(p *proc, sig syscall.Signal) {
	m.t.Helper()
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	cmd.Process.Signal(sig)
	testwait.Recv(m.t, exited)
}

// log returns what p wrote to its standard error.
func (m *mesh) log(p *proc) string {
	b, _ := os.ReadFile(filepath.Join(m.dir, p.spec.ID+".stderr"))
	return string(b)
}

// at is the caller's bucket of t.
func (m *mesh) at(t time.Time) int {
	m.caller.mu.Lock()
	defer m.caller.mu.Unlock()
	return int(t.Sub(m.caller.start) / bucket)
}

// phase lets the scenario's timeline run for d: the length of a phase
// under test, not a wait for an event.
func phase(d time.Duration) { time.Sleep(d) }

// servedAgain waits until bound after since for a bucket, from since on,
// in which server id answered calls, and returns how long after since
// that bucket ended; ok is false if none came within bound.
func (m *mesh) servedAgain(id string, since time.Time, bound time.Duration) (d time.Duration, ok bool) {
	from := m.at(since)
	var found time.Time
	testwait.Poll(time.Until(since.Add(bound+2*bucket)), func() bool {
		m.caller.mu.Lock()
		defer m.caller.mu.Unlock()
		for _, b := range m.caller.buckets {
			if b.I >= from && b.By[id] > 0 {
				found = m.caller.start.Add(time.Duration(b.I+1) * bucket)
				return true
			}
		}
		return false
	})
	if found.IsZero() || found.Sub(since) > bound {
		return bound, false
	}
	return max(found.Sub(since), 0), true
}

// merged waits up to bound after since until every node (caller and
// servers) sees every other, and returns how long that took; ok is false
// if it did not happen within bound.
func (m *mesh) merged(since time.Time, bound time.Duration) (d time.Duration, ok bool) {
	procs := append([]*proc{m.caller}, m.servers...)
	var all []string
	for _, p := range procs {
		all = append(all, p.spec.ID)
	}
	slices.Sort(all)
	held := testwait.Poll(time.Until(since.Add(bound)), func() bool {
		for _, p := range procs {
			p.mu.Lock()
			n := len(p.views)
			full := n > 0 && slices.Equal(p.views[n-1].view, all)
			p.mu.Unlock()
			if !full {
				return false
			}
		}
		return true
	})
	if !held {
		return bound, false
	}
	return time.Since(since), true
}

// deaths counts, over every node, the members that vanished from its
// view, and the members it began to suspect, between from and to.
func (m *mesh) deaths(from, to time.Time) (deaths, suspicions int, detail []string) {
	for _, p := range append([]*proc{m.caller}, m.servers...) {
		p.mu.Lock()
		for i := 1; i < len(p.views); i++ {
			prev, cur := p.views[i-1], p.views[i]
			if cur.at.Before(from) || cur.at.After(to) {
				continue
			}
			for _, id := range prev.view {
				if !slices.Contains(cur.view, id) {
					deaths++
					detail = append(detail, fmt.Sprintf("%s lost %s at +%.1f s", p.spec.ID, id, cur.at.Sub(from).Seconds()))
				}
			}
			for _, id := range cur.suspect {
				if !slices.Contains(prev.suspect, id) {
					suspicions++
				}
			}
		}
		p.mu.Unlock()
	}
	return deaths, suspicions, detail
}

// results is what a mesh leaves when it stops.
type results struct {
	caller callerReport
	// execs counts the executions of each once key, over every server.
	execs map[string]int
	// runs are the servers' own counts, of the runs that exited cleanly.
	runs []serverReport
	// callerLog is what the caller wrote to its standard error (the
	// node's warnings).
	callerLog string
}

// stop ends every process (SIGTERM), reads their files and returns them.
func (m *mesh) stop() *results {
	m.t.Helper()
	m.signal(m.caller, syscall.SIGTERM)
	for _, p := range m.servers {
		m.signal(p, syscall.SIGTERM)
	}
	r := &results{execs: map[string]int{}, callerLog: m.log(m.caller)}
	b, err := os.ReadFile(filepath.Join(m.dir, "caller.json"))
	if err == nil {
		err = json.Unmarshal(b, &r.caller)
	}
	if err != nil {
		m.t.Fatalf("the caller's report: %v; its log:\n%s", err, m.log(m.caller))
	}
	logs, _ := filepath.Glob(filepath.Join(m.dir, "exec-*.log"))
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			m.t.Fatal(err)
		}
		for key := range strings.Lines(string(b)) {
			r.execs[strings.TrimSuffix(key, "\n")]++
		}
	}
	reports, _ := filepath.Glob(filepath.Join(m.dir, "server-*.json"))
	for _, path := range reports {
		var sr serverReport
		b, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(b, &sr)
		}
		if err != nil {
			m.t.Error(errors.Join(fmt.Errorf("%s", path), err))
		}
		r.runs = append(r.runs, sr)
	}
	if m.t.Failed() {
		for _, p := range append([]*proc{m.caller}, m.servers...) {
			m.t.Logf("%s's log:\n%s", p.spec.ID, m.log(p))
		}
	}
	return r
}
