//go:build linux

package podsim_test

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/internal/testkit/meshsecrets"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/faultnet"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

// sim is a simulated cluster: host 0 runs the cluster process (DNS and
// probes), host 1 the caller pod, the other hosts server pods, each
// started at most once, so that every pod has an address of its own.
type sim struct {
	t       *testing.T
	hub     *faultnet.Hub
	dir     string
	flags   []string // the mesh flags every pod shares: key, TLS
	secrets meshsecrets.Files
	// probe is the server pods' readiness probe period.
	probe time.Duration

	cluster *exec.Cmd
	ops     io.WriteCloser
	opsMu   sync.Mutex // ops is written from the deletions' goroutines too
	next    int        // the next unused host

	mu     sync.Mutex
	pods   map[string]*pod
	caller *pod
}

// pod is a pod's process.
type pod struct {
	name    string
	host    *faultnet.Host
	cmd     *exec.Cmd
	started time.Time
	// up: when it printed its first line, that it serves (mesh.Serve).
	up      time.Time
	upCh    chan struct{}
	ready   chan struct{} // closed by its first passed readiness probe
	readyAt time.Time
	// served is closed when the caller reports the pod's first answered
	// call, at servedAt.
	served   chan struct{}
	servedAt time.Time
	// grace is its terminationGracePeriodSeconds, gracePeriod when 0.
	grace   time.Duration
	exited  chan struct{}
	exitErr error
}

// timeouts of the harness, far above what a step takes: a pod that is
// not ready by then is broken.
const (
	readyBound = 30 * time.Second
	// gracePeriod is the manifests' terminationGracePeriodSeconds.
	gracePeriod = 20 * time.Second
)

// newSim makes hosts hosts (the cluster, the caller and the server pods)
// and starts the cluster process on host 0.
func newSim(t *testing.T, hosts int) *sim {
	t.Helper()
	s := &sim{t: t, hub: faultnet.New(t, hosts), dir: t.TempDir(), next: 2, pods: map[string]*pod{}, probe: probePeriod}
	s.secrets = meshsecrets.Write(t, s.dir)
	s.flags = s.secrets.Flags()
	removeStaleConf()
	clusterIP := s.hub.Host(0).Addr.String()
	// Every namespace resolves through the cluster process, with a pod's
	// search path: `ip netns exec` mounts /etc/netns/NAME/resolv.conf
	// over /etc/resolv.conf.
	for _, h := range s.hub.Hosts() {
		etc := filepath.Join("/etc/netns", h.Name)
		t.Cleanup(func() { os.RemoveAll(etc) })
		if err := os.MkdirAll(etc, 0o755); err != nil {
			t.Fatal(err)
		}
		conf := fmt.Sprintf("nameserver %s\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n", clusterIP)
		if err := os.WriteFile(filepath.Join(etc, "resolv.conf"), []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec, _ := json.Marshal(clusterSpec{IP: clusterIP})
	cmd := s.command("cluster", "cluster "+string(spec))
	ops, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.hub.Start(s.hub.Host(0), cmd); err != nil {
		t.Fatal(err)
	}
	s.cluster, s.ops = cmd, ops
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e probeEvent
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			if e.Name == "" {
				close(up)
				continue
			}
			s.mu.Lock()
			if p := s.pods[e.Name]; p != nil && e.Ready && p.readyAt.IsZero() {
				p.readyAt = time.Unix(0, e.At)
				close(p.ready)
			}
			s.mu.Unlock()
		}
	}()
	select {
	case <-up:
	case <-time.After(readyBound):
		t.Fatalf("the cluster process did not start; its log:\n%s", s.log("cluster"))
	}
	return s
}

// command is the test binary as role, its standard error to a file.
func (s *sim) command(name, role string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), roleEnv+"="+role, podNameEnv+"="+name, podDirEnv+"="+s.dir, "GODEBUG=netdns=go")
	stderr, err := os.OpenFile(filepath.Join(s.dir, name+".stderr"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stderr = stderr
	s.t.Cleanup(func() { stderr.Close() })
	return cmd
}

// log returns what a process wrote to its standard error.
func (s *sim) log(name string) string {
	b, _ := os.ReadFile(filepath.Join(s.dir, name+".stderr"))
	return string(b)
}

// tell writes an operation to the cluster process. It may be called
// from any goroutine: a failure is an error of the test, not fatal.
func (s *sim) tell(op clusterOp) {
	s.t.Helper()
	b, _ := json.Marshal(op)
	s.opsMu.Lock()
	defer s.opsMu.Unlock()
	if _, err := s.ops.Write(append(b, '\n')); err != nil {
		s.t.Errorf("the cluster process: %v; its log:\n%s", err, s.log("cluster"))
	}
}

// host takes the next unused host.
func (s *sim) host() *faultnet.Host {
	s.t.Helper()
	if s.next >= len(s.hub.Hosts()) {
		s.t.Fatalf("no host left for a pod (%d hosts)", len(s.hub.Hosts()))
	}
	h := s.hub.Host(s.next)
	s.next++
	return h
}

// startPod creates server pod name at a new address: it is listed by the
// Service and probed from now on (it has its address), and its process
// starts with the flags of deploy/kubernetes/base/mathserver.yaml.
func (s *sim) startPod(name string) *pod {
	s.t.Helper()
	h := s.host()
	ip := h.Addr.String()
	p := &pod{name: name, host: h, cmd: s.command(name, "pod", append(podArgs(ip), s.flags...)...), upCh: make(chan struct{}), ready: make(chan struct{}), served: make(chan struct{}), exited: make(chan struct{})}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			s.mu.Lock()
			p.up = time.Now()
			s.mu.Unlock()
			close(p.upCh)
		}
		io.Copy(io.Discard, out)
	}()
	s.mu.Lock()
	s.pods[name] = p
	s.mu.Unlock()
	s.tell(clusterOp{Op: "add", Name: name, IP: ip, Period: s.probe})
	s.run(p)
	return p
}

// podArgs are a server pod's arguments but for its Secrets' files: those
// of deploy/kubernetes/base/mathserver.yaml, with the pod's address for
// $(POD_IP) (TestManifestMatches holds them equal).
func podArgs(ip string) []string {
	return []string{
		"-listen=:7070",
		fmt.Sprintf("-health-addr=:%d", healthPort),
		fmt.Sprintf("-gossip=0.0.0.0:%d", gossipPort),
		"-gossip-advertise=" + ip,
		"-dns=wizard-gossip",
		"-preset=lan",
	}
}

// run starts p's process and notes when it exits; the Service stops
// listing it then.
func (s *sim) run(p *pod) {
	s.t.Helper()
	p.started = time.Now()
	if err := s.hub.Start(p.host, p.cmd); err != nil {
		s.t.Fatal(err)
	}
	go func() {
		p.exitErr = p.cmd.Wait()
		close(p.exited)
	}()
}

// waitReady waits until p's readiness probe passed and returns how long
// after its start that was.
func (s *sim) waitReady(p *pod) time.Duration {
	s.t.Helper()
	select {
	case <-p.ready:
	case <-p.exited:
		s.t.Fatalf("pod %s exited before it was ready (%v); its log:\n%s", p.name, p.exitErr, s.log(p.name))
	case <-time.After(readyBound):
		s.t.Fatalf("pod %s not ready after %s; its log:\n%s", p.name, readyBound, s.log(p.name))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return p.readyAt.Sub(p.started)
}

// waitServed waits until the caller had a call answered by p and
// returns when that was.
func (s *sim) waitServed(p *pod) time.Time {
	s.t.Helper()
	select {
	case <-p.served:
	case <-p.exited:
		s.t.Fatalf("pod %s exited before it answered a call (%v); its log:\n%s", p.name, p.exitErr, s.log(p.name))
	case <-time.After(readyBound):
		s.t.Fatalf("pod %s answered no call %s after it was ready; its log:\n%s", p.name, readyBound, s.log(p.name))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return p.servedAt
}

// startCaller starts the caller pod on host 1, listed by the Service as
// a member of the mesh, and waits until it routes to servers pods and
// runs its load.
func (s *sim) startCaller(servers int) {
	s.t.Helper()
	h := s.hub.Host(1)
	ip := h.Addr.String()
	spec, _ := json.Marshal(callerSpec{IP: ip, Dir: s.dir, Workers: workers, Servers: servers, Flags: append([]string{
		fmt.Sprintf("-gossip=0.0.0.0:%d", gossipPort),
		"-gossip-advertise=" + ip,
		"-dns=_gossip._udp.wizard-gossip",
		"-preset=lan",
	}, s.flags...)})
	p := &pod{name: "caller", host: h, cmd: s.command("caller", "caller "+string(spec)), ready: make(chan struct{}), exited: make(chan struct{})}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	s.caller = p
	s.tell(clusterOp{Op: "add", Name: "caller", IP: ip})
	s.run(p)
	loaded := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "ready" {
				close(loaded)
			}
			if name, ok := strings.CutPrefix(line, "served "); ok {
				s.mu.Lock()
				if p := s.pods[name]; p != nil && p.servedAt.IsZero() {
					p.servedAt = time.Now()
					close(p.served)
				}
				s.mu.Unlock()
			}
		}
	}()
	select {
	case <-loaded:
	case <-p.exited:
		s.t.Fatalf("the caller exited (%v); its log:\n%s", p.exitErr, s.log("caller"))
	case <-time.After(90 * time.Second): // the caller gives up after a minute itself
		s.t.Fatalf("the caller did not start its load; its log:\n%s", s.log("caller"))
	}
}

// workers is the caller's number of workers of each kind.
const workers = 4

// deletion is what deleting a pod took.
type deletion struct {
	// sigterm: when SIGTERM was sent, after the preStop sleep.
	sigterm time.Time
	// drained: from SIGTERM until the process exited.
	drained time.Duration
	// killed: the grace period ran out and the pod was killed.
	killed  bool
	exitErr error
}

// deletePod deletes p as the kubelet does: the preStop sleep, SIGTERM,
// then SIGKILL if the grace period runs out; the headless Service lists
// it until it is gone, the gateway Service's proxy sends it no new
// connection from the start. It may be called from any goroutine.
func (s *sim) deletePod(p *pod, preStop time.Duration) deletion {
	s.t.Helper()
	begin := time.Now()
	s.tell(clusterOp{Op: "term", Name: p.name})
	phase(preStop)
	d := deletion{sigterm: time.Now()}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(cmp.Or(p.grace, gracePeriod) - time.Since(begin)):
		d.killed = true
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited // SIGKILL ends it
	}
	d.drained = time.Since(d.sigterm)
	d.exitErr = p.exitErr
	s.tell(clusterOp{Op: "del", Name: p.name})
	return d
}

// deletePods deletes ps at once, as a ReplicaSet scaled down does, and
// returns their deletions in the same order.
func (s *sim) deletePods(ps []*pod, preStop time.Duration) []deletion {
	s.t.Helper()
	ds := make([]deletion, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() { ds[i] = s.deletePod(p, preStop) })
	}
	wg.Wait()
	return ds
}

// killPods kills ps at once, as losing their node does: SIGKILL, no
// preStop, no drain; the pods are gone when their processes are. With
// unreachable their hosts are cut off the network first: no packet of
// theirs, nor the kernel's resets of their connections, gets out.
func (s *sim) killPods(ps []*pod, unreachable bool) time.Time {
	s.t.Helper()
	at := time.Now()
	if unreachable {
		for _, p := range ps {
			s.hub.Isolate(p.host)
		}
	}
	for _, p := range ps {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	for _, p := range ps {
		<-p.exited
		s.tell(clusterOp{Op: "del", Name: p.name})
	}
	return at
}

// stopCaller ends the caller's load (SIGTERM) and reads its report.
func (s *sim) stopCaller() callerReport {
	s.t.Helper()
	s.caller.cmd.Process.Signal(syscall.SIGTERM)
	testwait.Recv(s.t, s.caller.exited)
	var r callerReport
	b, err := os.ReadFile(filepath.Join(s.dir, "caller.json"))
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil {
		s.t.Fatalf("the caller's report: %v; its log:\n%s", err, s.log("caller"))
	}
	return r
}

// executions counts the executions of each once key, over every pod.
func (s *sim) executions() map[string]int {
	s.t.Helper()
	execs := map[string]int{}
	logs, _ := filepath.Glob(filepath.Join(s.dir, "exec-*.log"))
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			s.t.Fatal(err)
		}
		for key := range strings.Lines(string(b)) {
			execs[strings.TrimSuffix(key, "\n")]++
		}
	}
	return execs
}

// removeStaleConf removes the /etc/netns directories of faultnet's
// namespaces that no longer exist: those of a test process killed
// outright, whose namespaces faultnet.New has removed.
func removeStaleConf() {
	dirs, _ := filepath.Glob(filepath.Join("/etc/netns", faultnet.Prefix+"*"))
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join("/run/netns", filepath.Base(dir))); errors.Is(err, os.ErrNotExist) {
			os.RemoveAll(dir)
		}
	}
}
