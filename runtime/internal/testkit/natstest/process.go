package natstest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/internal/testkit/need"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
)

// serverModule is the nats-server module the go.mod pins; [Binary]
// builds its command.
const serverModule = "github.com/nats-io/nats-server/v2"

// BinaryEnv names a nats-server binary to run instead of building one.
const BinaryEnv = "WIZARD_NATS_SERVER"

var built struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of a nats-server binary: the one [BinaryEnv]
// names, else one built once per test process with the Go toolchain at
// the version the go.mod pins. Without either it skips t (fails it with
// WIZARD_REQUIRE=1).
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(BinaryEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("natstest: %s=%s: %v", BinaryEnv, p, err)
		}
		return p
	}
	built.once.Do(func() { built.path, built.err = build() })
	if built.err != nil {
		need.Skipf(t, "needs a nats-server binary (set %s, or let the Go toolchain build %s): %v", BinaryEnv, serverModule, built.err)
	}
	return built.path
}

// build builds the pinned nats-server into the user's cache directory
// (a temporary one without it), named by its version, unless it is there.
func build() (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	out, err := exec.Command(goTool, "list", "-m", "-f", "{{.Version}}", serverModule).Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", serverModule, err)
	}
	version := strings.TrimSpace(string(out))
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, "wizard-test", "nats-server-"+version)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	// Built beside and renamed: parallel test processes never run a
	// half-written binary.
	tmp := fmt.Sprintf("%s.%d", path, os.Getpid())
	cmd := exec.Command(goTool, "build", "-o", tmp, serverModule)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %v: %s", serverModule, err, strings.TrimSpace(stderr.String()))
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	return path, nil
}

// Process is a nats-server process: stopped when the test ends, and
// started again on the same port by [Process.Restart].
type Process struct {
	t    testing.TB
	bin  string
	conf string
	port int
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}   // closed once cmd is gone
	out    *testlog.Buffer // the process's output, written by exec's goroutines
}

// StartProcess starts a nats-server process on 127.0.0.1 and a free port,
// with the configuration conf (nats-server's config syntax; "" for none)
// written to a file and args added to its command line (cluster options,
// say). It skips t when no binary can be had (see [Binary]).
func StartProcess(t testing.TB, conf string, args ...string) *Process {
	t.Helper()
	return StartProcessOn(t, FreePort(t), conf, args...)
}

// StartProcessOn is [StartProcess] on a given port.
func StartProcessOn(t testing.TB, port int, conf string, args ...string) *Process {
	t.Helper()
	p := &Process{t: t, bin: Binary(t), conf: filepath.Join(t.TempDir(), "nats.conf"), port: port, args: args}
	if err := os.WriteFile(p.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	p.start()
	t.Cleanup(func() { p.Kill(syscall.SIGKILL) })
	return p
}

// FreePort returns a port of 127.0.0.1 free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// URL returns the process's client URL, "nats://127.0.0.1:<port>".
func (p *Process) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", p.port) }

// Port returns the process's client port.
func (p *Process) Port() int { return p.port }

func (p *Process) start() {
	p.t.Helper()
	out := &testlog.Buffer{}
	cmd := exec.Command(p.bin, append([]string{"-a", "127.0.0.1", "-p", fmt.Sprint(p.port), "-c", p.conf}, p.args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("natstest: start nats-server: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.exited, p.out = cmd, exited, out
	p.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p.port), time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
			p.t.Fatalf("natstest: nats-server exited: %v\n%s", cmd.ProcessState, out)
		default:
		}
		if time.Now().After(deadline) {
			p.Kill(syscall.SIGKILL)
			p.t.Fatalf("natstest: nats-server did not take connections within 10s: %v\n%s", err, out)
		}
		time.Sleep(10 * time.Millisecond) // polling a port, not synchronisation between goroutines
	}
}

// Kill sends sig to the process and waits until it is gone.
func (p *Process) Kill(sig syscall.Signal) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	<-exited
}

// Reload writes conf as the process's configuration and has it reload
// it (SIGHUP); the broker applies it soon after, not at once.
func (p *Process) Reload(conf string) {
	p.t.Helper()
	if err := os.WriteFile(p.conf, []byte(conf), 0o600); err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		p.t.Fatal(err)
	}
}

// Restart starts the process again, on the same port, after [Process.Kill].
func (p *Process) Restart() {
	p.t.Helper()
	p.start()
}

// Output returns what the current process wrote.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.out == nil {
		return ""
	}
	return p.out.String()
}
