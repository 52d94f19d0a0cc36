package gwbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The contenders of the side by side comparison.
const (
	WizardGateway = "wizard-gateway"
	MoleculerWeb  = "moleculer-web"
	GRPCGateway   = "grpc-gateway"
	// WizardDirect is no gateway: a wizard node calling the echo node over
	// TCP, the baseline of the gateway's overhead.
	WizardDirect = "wizard-direct"
	// WizardBaseline is another wizard-gateway binary (Config.BaselineGateway,
	// e.g. one built from main), set up as wizard-gateway is: a change's
	// before and after, paired in the same invocation.
	WizardBaseline = "wizard-gateway-baseline"
)

// titles label the contenders in tables and charts.
var titles = map[string]string{
	WizardGateway:  "wizard-gateway",
	MoleculerWeb:   "moleculer-web",
	GRPCGateway:    "grpc-gateway",
	WizardDirect:   "wizard TCP, direct (no gateway)",
	WizardBaseline: "wizard-gateway (baseline binary)",
}

// Gap is a contender that could not run, and why.
type Gap struct{ Contender, Reason string }

// env is what a run shares: its temporary directory, the gateway binary,
// the echo node, and every process it started.
type env struct {
	dir      string
	benchDir string // the bench module's root
	gwBin    string
	baseBin  string // WizardBaseline's binary, "" when not compared
	stderr   io.Writer
	logf     func(string, ...any)
	echo     *proc    // the wizard echo node
	profDir  string   // when set, the ramp's gateway is roleProfGateway, profiled into it
	gwEnv    []string // added to wizard-gateway's environment
	// httpClient is the load generator's HTTP client, ClientRaw or
	// ClientNetHTTP.
	httpClient string
	procs      []*proc
}

// start starts cmd (see [startProc]) and remembers it for stopAll.
func (e *env) start(ctx context.Context, name string, cmd *exec.Cmd, printsAddr bool) (*proc, error) {
	p, err := startProc(ctx, name, cmd, printsAddr, e.stderr)
	if err != nil {
		return nil, err
	}
	e.procs = append(e.procs, p)
	return p, nil
}

// stop stops p and forgets it.
func (e *env) stop(p *proc) error {
	for i, q := range e.procs {
		if q == p {
			e.procs = append(e.procs[:i], e.procs[i+1:]...)
			break
		}
	}
	return p.stop()
}

// stopAll stops the processes still running, the last started first.
func (e *env) stopAll() {
	for i := len(e.procs) - 1; i >= 0; i-- {
		if err := e.procs[i].stop(); err != nil {
			e.logf("%v", err)
		}
	}
	e.procs = nil
}

// child starts this binary as a child process of spec's role.
func (e *env) child(ctx context.Context, spec childSpec) (*proc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	js, _ := json.Marshal(spec)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envChild+"="+string(js))
	return e.start(ctx, spec.Role, cmd, true)
}

// buildGateway builds cmd/wizard-gateway of the main module (the bench
// module's replace) into e.dir.
func (e *env) buildGateway(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/wizardmesh/wizard").Output()
	if err != nil {
		return fmt.Errorf("go list the main module: %w", err)
	}
	bin := filepath.Join(e.dir, "wizard-gateway")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/wizard-gateway")
	cmd.Dir = strings.TrimSpace(string(out))
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/wizard-gateway in %s: %v\n%s", cmd.Dir, err, b)
	}
	e.gwBin = bin
	return nil
}

// freePort returns a port of 127.0.0.1 nobody listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// gateway is a running gateway of some contender: the process whose
// memory and CPU are read, and where its clients connect.
type gateway struct {
	name   string
	client string  // the load generator's HTTP client: ClientRaw or ClientNetHTTP
	main   *proc   // the gateway process
	procs  []*proc // every process of the contender, the gateway last
	base   string  // http://host:port
}

func (g *gateway) echoURL() string { return g.base + "/echo" }

// httpCaller is a caller of POST /echo over one connection of g.client's
// kind, with the bearer token when not "".
func (g *gateway) httpCaller(token string) caller {
	if g.client == ClientNetHTTP {
		return newHTTPCaller(g.echoURL(), token)
	}
	c, err := newRawHTTPCaller(g.echoURL(), token)
	if err != nil {
		panic(err) // g.base is ours: http://127.0.0.1:port
	}
	return c
}
func (g *gateway) wsURL() string { return "ws" + strings.TrimPrefix(g.base, "http") + "/ws" }

// gatewayConfig is wizard-gateway's YAML: POST /echo to the echo node,
// the WebSocket endpoint, no access log and no rate limits; with a signer,
// every request needs its JWT.
func gatewayConfig(port int, echoAddr string, s *signer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "server: {listen: \"127.0.0.1:%d\"}\n", port)
	fmt.Fprintf(&b, "mesh: {transport: tcp, listen: \"127.0.0.1:0\", peers: [%q]}\n", echoAddr)
	auth := "none"
	if s != nil {
		auth = "required"
		fmt.Fprintf(&b, "auth:\n  jwt: {keys: [%q], issuer: %q, audience: %q, algorithms: [%s]}\n", s.keyFile, jwtIssuer, jwtAudience, s.alg)
	}
	fmt.Fprintf(&b, "defaults: {timeout: 30s, max_timeout: 30s, auth: %s}\n", auth)
	b.WriteString("websocket: {path: /ws, max_inflight_per_conn: 64}\n")
	b.WriteString("access_log: {enabled: false}\n")
	b.WriteString("routes:\n  - {name: echo, method: POST, path: /echo, pattern: \"" + echoPattern + "\"}\n")
	return b.String()
}

// startWizardGateway starts wizard-gateway in front of the echo node and
// waits until /readyz answers 200.
// label names its config file and profile directory.
func (e *env) startWizardGateway(ctx context.Context, s *signer, label string) (*gateway, error) {
	return e.startWizardGatewayBin(ctx, e.gwBin, s, label)
}

// startWizardGatewayBin is startWizardGateway with the binary bin (not
// profiled: the profile mode profiles package gateway of this tree).
func (e *env) startWizardGatewayBin(ctx context.Context, bin string, s *signer, label string) (*gateway, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	name := "wizard-gateway-" + label
	file := filepath.Join(e.dir, name+".yaml")
	if err := os.WriteFile(file, []byte(gatewayConfig(port, e.echo.addr, s)), 0o644); err != nil {
		return nil, err
	}
	var p *proc
	if e.profDir != "" && bin == e.gwBin {
		dir := filepath.Join(e.profDir, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		p, err = e.child(ctx, childSpec{Role: roleProfGateway, Config: file, Dir: dir})
	} else {
		cmd := exec.Command(bin, "-c", file, "-l", "warn")
		cmd.Env = append(os.Environ(), e.gwEnv...)
		p, err = e.start(ctx, name, cmd, false)
	}
	if err != nil {
		return nil, err
	}
	gwName := WizardGateway
	if bin != e.gwBin {
		gwName = WizardBaseline
	}
	g := &gateway{name: gwName, client: e.httpClient, main: p, procs: []*proc{p}, base: "http://127.0.0.1:" + strconv.Itoa(port)}
	if err := waitReady(ctx, g.base+"/readyz", p); err != nil {
		e.stop(p)
		return nil, fmt.Errorf("wizard-gateway: %w", err)
	}
	return g, nil
}

// waitReady polls url until it answers 200, p exits, or a minute passes.
func waitReady(ctx context.Context, url string, p *proc) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last := "no answer"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			last = res.Status + ": " + strings.TrimSpace(string(b))
		} else {
			last = err.Error()
		}
		select {
		case <-tick.C:
		case <-p.Done():
			return fmt.Errorf("exited before %s answered 200: %v", url, p.Err())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %s", url, last)
		}
	}
}

// moleculerDir is where moleculer/server.js and its package files are.
func (e *env) moleculerDir() string { return filepath.Join(e.benchDir, "moleculer") }

// prepareMoleculer finds node and npm and installs the locked packages
// with npm ci when node_modules is missing or older than the lock file.
// It returns why moleculer-web cannot run, or "".
func (e *env) prepareMoleculer(ctx context.Context) string {
	if _, err := exec.LookPath("node"); err != nil {
		return "no node on PATH (Node.js is needed: apt-get install nodejs npm)"
	}
	dir := e.moleculerDir()
	lock, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return "no " + filepath.Join(dir, "package-lock.json")
	}
	if inst, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err == nil && !inst.ModTime().Before(lock.ModTime()) {
		return ""
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "no npm on PATH to install moleculer/node_modules (apt-get install npm)"
	}
	e.logf("moleculer-web: npm ci in %s", dir)
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Sprintf("npm ci failed: %v: %s", err, strings.TrimSpace(string(b)))
	}
	return ""
}

// startMoleculer starts the echo broker and the moleculer-web broker,
// joined by the TCP transporter on 127.0.0.1.
func (e *env) startMoleculer(ctx context.Context) (*gateway, error) {
	echoPort, err1 := freePort()
	gwPort, err2 := freePort()
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("moleculer-web: no free port: %v %v", err1, err2)
	}
	script := filepath.Join(e.moleculerDir(), "server.js")
	node := func(role string, env ...string) *exec.Cmd {
		cmd := exec.Command("node", script)
		cmd.Dir = e.moleculerDir()
		cmd.Env = append(append(os.Environ(), "ROLE="+role, "NODE_ENV=production"), env...)
		return cmd
	}
	echo, err := e.start(ctx, "moleculer echo", node("echo", "TCP_PORT="+strconv.Itoa(echoPort), fmt.Sprintf("PEER=127.0.0.1:%d/gateway", gwPort)), true)
	if err != nil {
		return nil, err
	}
	gw, err := e.start(ctx, "moleculer-web", node("gateway", "TCP_PORT="+strconv.Itoa(gwPort), fmt.Sprintf("PEER=127.0.0.1:%d/echo", echoPort), "HTTP_PORT=0"), true)
	if err != nil {
		e.stop(echo)
		return nil, err
	}
	return &gateway{name: MoleculerWeb, client: e.httpClient, main: gw, procs: []*proc{echo, gw}, base: "http://" + gw.addr}, nil
}

// startGRPCGateway starts the gRPC echo server and grpc-gateway in front
// of it.
func (e *env) startGRPCGateway(ctx context.Context) (*gateway, error) {
	echo, err := e.child(ctx, childSpec{Role: roleGRPCEcho, Listen: "127.0.0.1:0"})
	if err != nil {
		return nil, err
	}
	spec := childSpec{Role: roleGRPCGateway, Listen: "127.0.0.1:0", Upstream: echo.addr}
	if e.profDir != "" {
		spec.Dir = filepath.Join(e.profDir, "grpc-gateway")
		if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
			e.stop(echo)
			return nil, err
		}
	}
	gw, err := e.child(ctx, spec)
	if err != nil {
		e.stop(echo)
		return nil, err
	}
	return &gateway{name: GRPCGateway, client: e.httpClient, main: gw, procs: []*proc{echo, gw}, base: "http://" + gw.addr}, nil
}

// stopGateway stops a contender's processes, the gateway first.
func (e *env) stopGateway(g *gateway) {
	for i := len(g.procs) - 1; i >= 0; i-- {
		if err := e.stop(g.procs[i]); err != nil {
			e.logf("%v", err)
		}
	}
}
