//go:build linux

package podsim_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/wizardmesh/wizard/internal/testkit/need"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/faultnet"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

// The gateway Deployment of deploy/kubernetes/base/gateway.yaml
// (TestGatewayManifestMatches holds them equal): its replicas, grace
// period and preStop sleep (the long form's).
const (
	gatewayReplicas = 2
	gatewayGrace    = 25 * time.Second
	gatewayPreStop  = 5 * time.Second
)

// wsClients is the number of WebSocket clients, wsPeriod each one's time
// between calls: 400 calls/s in all.
const (
	wsClients = 200
	wsPeriod  = 500 * time.Millisecond
)

// TestGatewayRoll rolls the gateway Deployment (maxSurge 1,
// maxUnavailable 0) while wsClients WebSocket clients stay connected
// through the Service wizard-gateway and call a non-idempotent route,
// served by 3 server pods that stay. A deleted gateway pod leaves the
// Service's endpoints at once, then gets its preStop sleep and SIGTERM:
// it answers what is in flight, refuses new request frames (503
// unavailable, which the clients send again) and closes each WebSocket
// with 1012; the clients reconnect through the Service. A request frame
// that crosses the close frame is neither answered nor run (the gateway
// reads no request after its close): a client sends a request left
// unanswered at a 1012 close again, on its next connection, and the
// servers' execution counts show whether that was safe.
//
// Targets: every client connected; no request answered other than 200
// or 503 unavailable; no request lost in flight (unanswered at a close
// other than 1012); every key sent again answered 200; every key answered 200 run once by a
// server pod, no key run twice; some clients reconnected; every old
// gateway exited within its grace period.
func TestGatewayRoll(t *testing.T) {
	f := gate(t)
	faultnet.Require(t)
	bin := buildGateway(t)
	const servers = 3
	s := newSim(t, 2+servers+gatewayReplicas*(f.rolls+1))
	cfg := s.gatewayConfig(t)
	var pods []*pod
	for i := range servers {
		pods = append(pods, s.startPod(fmt.Sprintf("math-%d", i)))
	}
	for _, p := range pods {
		s.waitReady(p)
	}
	var live []*pod
	for i := range gatewayReplicas {
		live = append(live, s.startGateway(bin, cfg, fmt.Sprintf("gateway-0-%d", i)))
	}
	for _, p := range live {
		s.waitReady(p)
	}
	clients := s.startWSClients()
	phase(f.warm)
	type gwStep struct {
		newPod, oldPod string
		ready          time.Duration
		deletion
	}
	var steps []gwStep
	for roll := 1; roll <= f.rolls; roll++ {
		for i := range gatewayReplicas {
			p := s.startGateway(bin, cfg, fmt.Sprintf("gateway-%d-%d", roll, i))
			st := gwStep{newPod: p.name, oldPod: live[0].name, ready: s.waitReady(p)}
			st.deletion = s.deletePod(live[0], f.preStop)
			live = append(live[1:], p)
			steps = append(steps, st)
		}
	}
	phase(f.warm)
	r := s.stopWSClients(clients)
	execs := s.executions()

	t.Logf("form %s: %d gateway pods rolled %d time(s), preStop %s, %d WebSocket clients, a call each every %s, through a TCP proxy standing for the Service", f.name, gatewayReplicas, f.rolls, f.preStop, wsClients, wsPeriod)
	for _, st := range steps {
		t.Logf("step %s → %s: ready (probe) after %s; %s drained in %s (exit %s)", st.oldPod, st.newPod, seconds(st.ready), st.oldPod, seconds(st.drained), exitStatus(st.exitErr))
		if st.killed {
			t.Errorf("gateway pod %s was killed at the end of its %s grace period", st.oldPod, gatewayGrace)
		} else if st.exitErr != nil {
			t.Errorf("gateway pod %s exited with %v; its log:\n%s", st.oldPod, st.exitErr, tail(s.log(st.oldPod)))
		}
	}
	var closes []string
	for _, c := range slices.Sorted(maps.Keys(r.Closes)) {
		closes = append(closes, fmt.Sprintf("%s: %d", c, r.Closes[c]))
	}
	t.Logf("WebSocket calls: %d answered 200, %d answered 503 and sent again, %d unanswered at their connection's 1012 close and sent again, %d failed %s, %d lost in flight, %d unresolved at the end", r.OK, r.Retried, r.AtClose, sum(r.Failed), codes(r.Failed), r.Lost, r.Unresolved)
	t.Logf("connections: %d made, %d reconnects (longest %s from close to connected), %d failed dials; closes by code: %s", r.Dials, r.Reconnects, seconds(r.MaxReconnect), r.DialErrors, strings.Join(closes, ", "))
	for _, fl := range r.Failures {
		t.Logf("failed call %q: began +%s, ended +%s: %s: %s", fl.Key,
			seconds(time.Unix(0, fl.Began).Sub(time.Unix(0, r.Start))), seconds(time.Unix(0, fl.Ended).Sub(time.Unix(0, r.Start))), fl.Code, fl.Err)
	}
	if r.OK == 0 {
		t.Errorf("no load: no call answered 200")
	}
	if n := sum(r.Failed); n != 0 {
		t.Errorf("%d calls answered neither 200 nor 503 unavailable %s; want 0", n, codes(r.Failed))
	}
	if r.Lost != 0 {
		t.Errorf("%d calls in flight when their connection closed; want 0", r.Lost)
	}
	if r.Unresolved != 0 {
		t.Errorf("%d calls sent again were not answered; want 0", r.Unresolved)
	}
	if r.Reconnects == 0 {
		t.Errorf("no client reconnected: the roll closed no connection")
	}
	var twice []string
	for key, n := range execs {
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s ×%d", key, n))
		}
	}
	slices.Sort(twice)
	if len(twice) > 0 {
		t.Errorf("%d keys run more than once: %s", len(twice), strings.Join(twice[:min(len(twice), 20)], ", "))
	}
	unrun := 0
	for _, key := range r.OKKeys {
		if execs[key] != 1 {
			unrun++
		}
	}
	if unrun > 0 {
		t.Errorf("%d calls answered 200 that no server pod ran", unrun)
	}
	t.Logf("keys run: %d distinct, %d run twice; calls answered 200 that no pod ran: %d", len(execs), len(twice), unrun)
	if t.Failed() {
		for _, name := range slices.Sorted(maps.Keys(s.pods)) {
			if l := s.log(name); l != "" {
				t.Logf("%s's log (its end):\n%s", name, tail(l))
			}
		}
		t.Logf("the clients' log:\n%s", tail(s.log("wsclients")))
	}
}

// buildGateway builds cmd/wizard-gateway into a temporary directory
// (skipped without the go command: a failure under WIZARD_REQUIRE=1).
func buildGateway(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		need.Skipf(t, "no go command to build cmd/wizard-gateway: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "wizard-gateway")
	begin := time.Now()
	out, err := exec.Command(goTool, "build", "-o", bin, "github.com/wizardmesh/wizard/cmd/wizard-gateway").CombinedOutput()
	if err != nil {
		t.Fatalf("go build cmd/wizard-gateway: %v\n%s", err, out)
	}
	t.Logf("cmd/wizard-gateway built in %s", seconds(time.Since(begin)))
	return bin
}

// gatewayConfig writes the gateway's configuration: that of
// deploy/kubernetes/base/gateway-config.yaml (the ConfigMap), with the
// Secrets' files where the test wrote them and one route, to the
// non-idempotent pattern of the server pods.
func (s *sim) gatewayConfig(t *testing.T) string {
	t.Helper()
	var cfg map[string]any
	read(t, filepath.Join("..", "..", "..", "deploy", "kubernetes", "base", "gateway-config.yaml"), &cfg)
	mesh, ok := cfg["mesh"].(map[string]any)
	if !ok {
		t.Fatalf("gateway-config.yaml: no mesh section")
	}
	mesh["gossip_key_file"] = s.secrets.Key
	mesh["tls"] = map[string]any{"cert_file": s.secrets.Cert, "key_file": s.secrets.CertKey, "ca_file": s.secrets.CA, "server_name": "wizard-mesh"}
	cfg["routes"] = []any{map[string]any{"name": "podsim-once", "method": "POST", "path": "/api/podsim/once", "pattern": oncePattern}}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(s.dir, "gateway.yaml")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// startGateway creates gateway pod name at a new address, as
// deploy/kubernetes/base/gateway.yaml's template does: the binary with
// -c and its configuration, WIZARD_GATEWAY_GOSSIP_ADVERTISE the pod's
// address; the headless Service lists it (it is of the mesh), the
// kubelet probes its /readyz on its HTTP port, and once ready it is an
// endpoint of the Service wizard-gateway. Its log level is warn, not the
// manifest's info: the access log of 400 calls/s is not wanted here.
func (s *sim) startGateway(bin, cfg, name string) *pod {
	s.t.Helper()
	h := s.host()
	ip := h.Addr.String()
	cmd := exec.Command(bin, "-c="+cfg)
	cmd.Env = append(os.Environ(), "WIZARD_GATEWAY_GOSSIP_ADVERTISE="+ip, "WIZARD_GATEWAY_LOG_LEVEL=warn", "GODEBUG=netdns=go")
	stderr, err := os.OpenFile(filepath.Join(s.dir, name+".stderr"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { stderr.Close() })
	cmd.Stderr, cmd.Stdout = stderr, stderr
	p := &pod{name: name, host: h, cmd: cmd, grace: gatewayGrace, upCh: make(chan struct{}), ready: make(chan struct{}), served: make(chan struct{}), exited: make(chan struct{})}
	s.mu.Lock()
	s.pods[name] = p
	s.mu.Unlock()
	s.tell(clusterOp{Op: "add", Name: name, IP: ip, Gateway: true})
	s.run(p)
	return p
}

// startWSClients starts the WebSocket clients on host 1 and waits until
// every one has connected.
func (s *sim) startWSClients() *pod {
	s.t.Helper()
	h := s.hub.Host(1)
	spec, _ := json.Marshal(wsSpec{
		URL: fmt.Sprintf("ws://%s:%d/ws", s.hub.Host(0).Addr, servicePort), Dir: s.dir,
		Clients: wsClients, Period: wsPeriod,
	})
	p := &pod{name: "wsclients", host: h, cmd: s.command("wsclients", "wsclients "+string(spec)), exited: make(chan struct{})}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	s.run(p)
	connected := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "ready" {
				close(connected)
			}
		}
		io.Copy(io.Discard, out)
	}()
	select {
	case <-connected:
	case <-p.exited:
		s.t.Fatalf("the WebSocket clients exited (%v); their log:\n%s", p.exitErr, tail(s.log("wsclients")))
	case <-time.After(90 * time.Second): // they give up after a minute themselves
		s.t.Fatalf("the WebSocket clients did not connect; their log:\n%s", tail(s.log("wsclients")))
	}
	return p
}

// stopWSClients ends the clients' load (SIGTERM) and reads their report.
func (s *sim) stopWSClients(p *pod) wsReport {
	s.t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	testwait.Recv(s.t, p.exited)
	var r wsReport
	b, err := os.ReadFile(filepath.Join(s.dir, "wsclients.json"))
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil {
		s.t.Fatalf("the WebSocket clients' report: %v; their log:\n%s", err, tail(s.log("wsclients")))
	}
	return r
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// tail is the end of a log: its last 60 lines.
func tail(log string) string {
	lines := strings.SplitAfter(log, "\n")
	return strings.Join(lines[max(0, len(lines)-60):], "")
}

// TestGatewayManifestMatches holds the gateway simulation to
// deploy/kubernetes/base/gateway.yaml: strategy, replicas, grace period,
// preStop sleep (the long form's), probe period and path, the arguments
// and the environment variable of the pod's address.
func TestGatewayManifestMatches(t *testing.T) {
	var deploy struct {
		Spec struct {
			Replicas int
			Strategy struct {
				RollingUpdate struct {
					MaxSurge       int `yaml:"maxSurge"`
					MaxUnavailable int `yaml:"maxUnavailable"`
				} `yaml:"rollingUpdate"`
			}
			Template struct {
				Spec struct {
					TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
					Containers                    []struct {
						Args []string
						Env  []struct {
							Name      string
							ValueFrom struct {
								FieldRef struct {
									FieldPath string `yaml:"fieldPath"`
								} `yaml:"fieldRef"`
							} `yaml:"valueFrom"`
						}
						ReadinessProbe struct {
							PeriodSeconds int `yaml:"periodSeconds"`
							HTTPGet       struct {
								Path string
							} `yaml:"httpGet"`
						} `yaml:"readinessProbe"`
						Lifecycle struct {
							PreStop struct {
								Sleep struct{ Seconds int }
							} `yaml:"preStop"`
						}
					}
				}
			}
		}
	}
	// gateway.yaml holds the Deployment and the Service: the first
	// document is the Deployment.
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "kubernetes", "base", "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	doc, _, _ := strings.Cut(string(b), "\n---\n")
	if err := yaml.Unmarshal([]byte(doc), &deploy); err != nil {
		t.Fatal(err)
	}
	if deploy.Spec.Replicas != gatewayReplicas {
		t.Errorf("gateway.yaml: replicas %d; the simulation's: %d", deploy.Spec.Replicas, gatewayReplicas)
	}
	ru := deploy.Spec.Strategy.RollingUpdate
	if ru.MaxSurge != 1 || ru.MaxUnavailable != 0 {
		t.Errorf("gateway.yaml: maxSurge %d, maxUnavailable %d; the simulation rolls with 1 and 0", ru.MaxSurge, ru.MaxUnavailable)
	}
	pod := deploy.Spec.Template.Spec
	if got := time.Duration(pod.TerminationGracePeriodSeconds) * time.Second; got != gatewayGrace {
		t.Errorf("gateway.yaml: terminationGracePeriodSeconds %s; the simulation's: %s", got, gatewayGrace)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("gateway.yaml: %d containers, want 1", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	if got := time.Duration(ctr.ReadinessProbe.PeriodSeconds) * time.Second; got != probePeriod || ctr.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("gateway.yaml: readiness probe %s every %s; the simulation's: /readyz every %s", ctr.ReadinessProbe.HTTPGet.Path, got, probePeriod)
	}
	if got := time.Duration(ctr.Lifecycle.PreStop.Sleep.Seconds) * time.Second; got != gatewayPreStop || gatewayPreStop != longForm.preStop {
		t.Errorf("gateway.yaml: preStop sleep %s; the long form's: %s", got, longForm.preStop)
	}
	if !slices.Equal(ctr.Args, []string{"-c=/etc/wizard-gateway/gateway.yaml"}) {
		t.Errorf("gateway.yaml: arguments %q; the simulation gives -c and the configuration only", ctr.Args)
	}
	if len(ctr.Env) != 1 || ctr.Env[0].Name != "WIZARD_GATEWAY_GOSSIP_ADVERTISE" || ctr.Env[0].ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("gateway.yaml: environment %+v; the simulation sets WIZARD_GATEWAY_GOSSIP_ADVERTISE to the pod's address", ctr.Env)
	}
	var cfg struct {
		Server struct {
			Listen string
		}
	}
	read(t, filepath.Join("..", "..", "..", "deploy", "kubernetes", "base", "gateway-config.yaml"), &cfg)
	if want := fmt.Sprintf(":%d", gatewayPort); cfg.Server.Listen != want {
		t.Errorf("gateway-config.yaml: server.listen %q; the simulation probes and proxies to %q", cfg.Server.Listen, want)
	}
}
