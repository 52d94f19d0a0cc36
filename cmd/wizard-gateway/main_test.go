package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/wizardmesh/wizard/gateway/config"
	"github.com/wizardmesh/wizard/internal/version"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

const guard = 30 * time.Second

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > guard {
			t.Fatalf("after %v: %s", guard, what)
		}
		time.Sleep(5 * time.Millisecond) // a polling interval, not synchronisation
	}
}

func noEnv(string) string { return "" }

func TestHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--help"}, noEnv, &out, &errOut, nil, nil); code != 0 {
		t.Fatalf("--help exited %d: %s", code, errOut.String())
	}
	var f flags
	for _, d := range f.defs() {
		if !strings.Contains(out.String(), "--"+d.long) || !strings.Contains(out.String(), envName(d.long)) {
			t.Errorf("--help does not name --%s and %s", d.long, envName(d.long))
		}
	}
	for _, s := range []string{"check-config", "--version", "SIGHUP", "/readyz"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("--help does not say %q", s)
		}
	}
	if code := run([]string{"--nope"}, noEnv, &out, &errOut, nil, nil); code != 2 || !strings.Contains(errOut.String(), "--help") {
		t.Errorf("an unknown flag: exit %d, %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run(nil, noEnv, &out, &errOut, nil, nil); code != 2 || !strings.Contains(errOut.String(), "-c FILE") {
		t.Errorf("no config: exit %d, %q", code, errOut.String())
	}
}

// TestVersion: --version (and -V, -version) prints the release, the
// commit and the Go version, and exits 0 without a configuration.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "-version", "-V"} {
		var out, errOut bytes.Buffer
		code := run([]string{arg}, noEnv, &out, &errOut, nil, nil)
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if code != 0 || len(lines) != 3 || lines[0] != "wizard-gateway "+version.Release ||
			!strings.HasPrefix(lines[1], "commit ") || lines[2] != "go     "+goruntime.Version() {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", arg, code, out.String(), errOut.String())
		}
	}
}

func TestFlagsFromEnv(t *testing.T) {
	env := map[string]string{"WIZARD_GATEWAY_PORT": "9001", "WIZARD_GATEWAY_CONFIG": "env.yaml", "WIZARD_GATEWAY_SEEDS": "a:1,b:2", "WIZARD_GATEWAY_LOG_LEVEL": "debug"}
	var f flags
	if err := f.parse([]string{"-p", "9002", "--ip", "127.0.0.1"}, func(k string) string { return env[k] }, io.Discard); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{"config": f.config, "ip": f.ip, "port": f.port, "seeds": f.seeds, "log-level": f.logLevel}
	want := map[string]string{"config": "env.yaml", "ip": "127.0.0.1", "port": "9002", "seeds": "a:1,b:2", "log-level": "debug"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("flags (-want +got):\n%s", d)
	}
	var g flags
	g.parse([]string{"--config=x.yaml", "--port", "1"}, func(k string) string { return env[k] }, io.Discard)
	if g.config != "x.yaml" || g.port != "1" {
		t.Errorf("long forms: %+v", g)
	}
}

// TestGossipAdvertiseFromEnv: a pod's IP, given in the environment as
// Kubernetes' downward API does, becomes the advertised gossip address
// over the file's.
func TestGossipAdvertiseFromEnv(t *testing.T) {
	env := map[string]string{"WIZARD_GATEWAY_GOSSIP_ADVERTISE": "10.1.2.3"}
	var f flags
	if err := f.parse(nil, func(k string) string { return env[k] }, io.Discard); err != nil {
		t.Fatal(err)
	}
	m := config.Mesh{GossipAdvertise: "10.9.9.9"}
	applyMeshFlags(&m, &f)
	if m.GossipAdvertise != "10.1.2.3" {
		t.Errorf("mesh.gossip_advertise = %q, want the environment's 10.1.2.3", m.GossipAdvertise)
	}
	if _, err := gossipOf(m, nil); err != nil {
		t.Errorf("gossip with the advertised address: %v", err)
	}
}

func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("routes:\n  - {method: GET, path: /a, pattern: \"role:a\"}\n"), 0o600)
	os.WriteFile(bad, []byte("routes:\n  - {method: GET, path: /a, pattern: \"role:a\", colour: red}\n"), 0o600)
	var out, errOut bytes.Buffer
	if code := run([]string{"check-config", good}, noEnv, &out, &errOut, nil, nil); code != 0 || !strings.Contains(out.String(), "ok") {
		t.Errorf("good file: exit %d, %q %q", code, out.String(), errOut.String())
	}
	if code := run([]string{"check-config", bad}, noEnv, &out, &errOut, nil, nil); code != 1 || !strings.Contains(errOut.String(), bad+":2:") || !strings.Contains(errOut.String(), "colour") {
		t.Errorf("bad file: exit %d, %q", code, errOut.String())
	}
}

func TestListenAddr(t *testing.T) {
	for _, tc := range []struct{ listen, ip, port, want string }{
		{":8080", "", "", ":8080"}, {":8080", "127.0.0.1", "", "127.0.0.1:8080"}, {"0.0.0.0:80", "", "9", "0.0.0.0:9"}, {":8080", "::1", "0", "[::1]:0"},
	} {
		if got, err := listenAddr(tc.listen, tc.ip, tc.port); err != nil || got != tc.want {
			t.Errorf("listenAddr(%q, %q, %q) = %q, %v; want %q", tc.listen, tc.ip, tc.port, got, err, tc.want)
		}
	}
	if _, err := listenAddr(":80", "localhost", ""); err == nil {
		t.Error("--ip localhost: no error")
	}
}

// TestReloadNeedsRestart: SIGHUP applies CORS with the routes, and a
// setting only a restart changes is named in the log ("needs a
// restart"), not passed over with "reloaded".
func TestReloadNeedsRestart(t *testing.T) {
	svc := echoNode(t)
	cfgFile := filepath.Join(t.TempDir(), "gateway.yaml")
	os.WriteFile(cfgFile, []byte("access_log: {format: text}\nroutes:\n  - {method: GET, path: /one, pattern: \"role:t,cmd:echo\"}\n"), 0o600)
	base, stderr, sigs := startProgram(t, cfgFile, svc)
	get := func() (int, string) {
		req, _ := http.NewRequest("GET", base+"/one", nil)
		req.Header.Set("Origin", "https://b.example")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return -1, ""
		}
		res.Body.Close()
		return res.StatusCode, res.Header.Get("Access-Control-Allow-Origin")
	}
	until(t, "GET /one answers 200", func() bool { st, _ := get(); return st == 200 })
	os.WriteFile(cfgFile, []byte("server: {read_header_timeout: 7s}\ncors: {origins: [\"https://b.example\"]}\naccess_log: {format: text}\nroutes:\n  - {method: GET, path: /one, pattern: \"role:t,cmd:echo\"}\n"), 0o600)
	sigs <- syscall.SIGHUP
	until(t, "the reload logged", func() bool { return strings.Contains(stderr.String(), "reloaded") })
	if !strings.Contains(stderr.String(), "needs a restart: server.read_header_timeout") {
		t.Errorf("the log does not say that read_header_timeout needs a restart:\n%s", stderr.String())
	}
	if st, origin := get(); st != 200 || origin != "https://b.example" {
		t.Errorf("after the reload: %d, Access-Control-Allow-Origin %q; want 200 and the new origin", st, origin)
	}
}

// echoNode is a mesh node on 127.0.0.1 serving role:t,cmd:echo.
func echoNode(t *testing.T) *runtime.Node {
	t.Helper()
	tr, err := tcp.New(tcp.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := runtime.New(runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"), runtime.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	svc.Add("role:t,cmd:echo", func(ctx context.Context, req runtime.Request) (any, error) { return req.Msg(), nil })
	return svc
}

// startProgram runs the program on cfgFile in front of svc until the
// test ends (then SIGTERM, and it must exit 0): its base URL, its
// stderr and its signals.
func startProgram(t *testing.T, cfgFile string, svc *runtime.Node) (string, *syncBuffer, chan<- os.Signal) {
	t.Helper()
	sigs := make(chan os.Signal, 1)
	addrs := make(chan string, 1)
	stderr := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"-c", cfgFile, "-i", "127.0.0.1", "-p", "0", "--listen-mesh", "127.0.0.1:0", "--peers", svc.Addr()}, noEnv, io.Discard, stderr, sigs, func(a string) { addrs <- a })
	}()
	t.Cleanup(func() {
		sigs <- syscall.SIGTERM
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("exit %d after SIGTERM: %s", code, stderr.String())
			}
		case <-time.After(guard):
			t.Error("did not exit after SIGTERM")
		}
	})
	select {
	case a := <-addrs:
		return "http://" + a, stderr, sigs
	case code := <-done:
		t.Fatalf("exited %d: %s", code, stderr.String())
	case <-time.After(guard):
		t.Fatal("never served")
	}
	return "", nil, nil
}

// TestServeReload runs the program against a mesh node on 127.0.0.1:
// a call through its route, a SIGHUP that swaps the routes, a bad file
// that keeps them, and SIGTERM.
func TestServeReload(t *testing.T) {
	svc := echoNode(t)

	cfgFile := filepath.Join(t.TempDir(), "gateway.yaml")
	write := func(routes string) {
		os.WriteFile(cfgFile, []byte("access_log: {format: text}\nroutes:\n"+routes), 0o600)
	}
	write("  - {method: GET, path: /one, pattern: \"role:t,cmd:echo\"}\n")
	sigs := make(chan os.Signal, 1)
	addrs := make(chan string, 1)
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"-c", cfgFile, "-i", "127.0.0.1", "-p", "0", "--listen-mesh", "127.0.0.1:0", "--peers", svc.Addr()}, noEnv, io.Discard, &stderr, sigs, func(a string) { addrs <- a })
	}()
	var base string
	select {
	case a := <-addrs:
		base = "http://" + a
	case code := <-done:
		t.Fatalf("exited %d: %s", code, stderr.String())
	case <-time.After(guard):
		t.Fatal("never served")
	}
	status := func(path string) int {
		res, err := http.Get(base + path)
		if err != nil {
			return -1
		}
		res.Body.Close()
		return res.StatusCode
	}
	until(t, "GET /one answers 200", func() bool { return status("/one") == 200 })
	write("  - {method: GET, path: /two, pattern: \"role:t,cmd:echo\"}\n")
	sigs <- syscall.SIGHUP
	until(t, "GET /two answers 200 after SIGHUP", func() bool { return status("/two") == 200 })
	if st := status("/one"); st != 404 {
		t.Errorf("the old route after the reload: %d", st)
	}
	write("  - {method: GET, path: /three, pattern: \"role:t,cmd:{x}\"}\n")
	sigs <- syscall.SIGHUP
	until(t, "the failed reload logged", func() bool { return strings.Contains(stderr.String(), "reload failed") })
	if st := status("/two"); st != 200 {
		t.Errorf("after a bad reload: %d, want the old routes", st)
	}
	if !strings.Contains(stderr.String(), "gateway.yaml:") {
		t.Errorf("the failed reload does not say where: %s", stderr.String())
	}
	sigs <- syscall.SIGTERM
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after SIGTERM: %s", code, stderr.String())
		}
	case <-time.After(guard):
		t.Fatal("did not exit after SIGTERM")
	}
}
