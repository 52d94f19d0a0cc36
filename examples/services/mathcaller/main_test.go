package main_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/internal/testkit/meshsecrets"
)

// TestProcesses builds mathserver, mathcaller and usersserver and runs
// them as OS processes on 127.0.0.1: server and caller over TCP and over
// QUIC with static peers, then three processes joined by gossip.
func TestProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs two binaries")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	for _, name := range []string{"mathserver", "mathcaller", "usersserver"} {
		build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, name), "../"+name)
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
	}

	for _, kind := range []string{"tcp", "quic"} {
		t.Run(kind, func(t *testing.T) { twoProcesses(t, ctx, dir, kind) })
	}
	t.Run("server logs", func(t *testing.T) { serverLogs(t, ctx, dir) })
	t.Run("probes and SIGTERM", func(t *testing.T) { probesAndSIGTERM(t, ctx, dir) })
	// As the Kubernetes manifests run them: mutual TLS with one
	// certificate name for every member, encrypted gossip, seeds from a
	// DNS name.
	t.Run("mesh with TLS and keys", func(t *testing.T) {
		flags := append([]string{"-gossip", "127.0.0.1:0"}, meshsecrets.Write(t, t.TempDir()).Flags()...)
		_, seed := start(t, ctx, dir, "usersserver", append([]string{"-listen", "127.0.0.1:0"}, flags...)...)
		_, port, _ := net.SplitHostPort(seed)
		dns := []string{"-dns", "localhost:" + port}
		start(t, ctx, dir, "mathserver", append(append([]string{"-listen", "127.0.0.1:0"}, flags...), dns...)...)
		out, err := exec.CommandContext(ctx, filepath.Join(dir, "mathcaller"), append(flags, dns...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("mathcaller: %v\n%s", err, out)
		}
		if string(out) != wantOutput {
			t.Errorf("mathcaller printed:\n%s\nwant:\n%s", out, wantOutput)
		}
	})
	// Three processes in a gossip mesh: the users service is the seed, the
	// math service joins through it, and the caller, given only the seed's
	// gossip address, finds the math service in the mesh.
	t.Run("mesh", func(t *testing.T) {
		_, seed := start(t, ctx, dir, "usersserver", "-listen", "127.0.0.1:0", "-gossip", "127.0.0.1:0")
		start(t, ctx, dir, "mathserver", "-listen", "127.0.0.1:0", "-gossip", "127.0.0.1:0", "-seeds", seed)
		out, err := exec.CommandContext(ctx, filepath.Join(dir, "mathcaller"), "-gossip", "127.0.0.1:0", "-seeds", seed).CombinedOutput()
		if err != nil {
			t.Fatalf("mathcaller: %v\n%s", err, out)
		}
		if string(out) != wantOutput {
			t.Errorf("mathcaller printed:\n%s\nwant:\n%s", out, wantOutput)
		}
	})
}

const wantOutput = "sum(1, 2, 3.5) = 6.5\nproduct(2, 3, 7) = 42\ndivide(1, 0) -> invalid_argument: mathsvc: division of 1 by zero\n"

// start runs one of the built commands until the test ends and returns
// the transport and gossip addresses from its first line
// ("NAME: serving N patterns on KIND ADDR[, gossip GOSSIP][, health HEALTH]").
func start(t *testing.T, ctx context.Context, dir, name string, args ...string) (addr, gossip string) {
	t.Helper()
	return startTo(t, ctx, nil, dir, name, args...)
}

// startTo is start with the command's standard error written to stderr.
func startTo(t *testing.T, ctx context.Context, stderr io.Writer, dir, name string, args ...string) (addr, gossip string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, name), args...)
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt) // leave the mesh, as a stopped service does
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading %s's addresses: %v", name, err)
	}
	a := parseFirstLine(line)
	return a.addr, a.gossip
}

// addrs are the addresses a server's first line gives.
type addrs struct{ addr, gossip, health string }

func parseFirstLine(line string) addrs {
	line, health, _ := strings.Cut(strings.TrimSpace(line), ", health ")
	before, gossip, _ := strings.Cut(line, ", gossip ")
	fields := strings.Fields(before)
	return addrs{fields[len(fields)-1], gossip, health}
}

// probesAndSIGTERM: a server with -health-addr answers its probes, and
// SIGTERM, what Kubernetes sends a pod, shuts it down gracefully: it
// exits 0.
func probesAndSIGTERM(t *testing.T, ctx context.Context, dir string) {
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "mathserver"), "-listen", "127.0.0.1:0", "-health-addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading mathserver's addresses: %v", err)
	}
	health := parseFirstLine(line).health
	if health == "" {
		t.Fatalf("mathserver's first line names no health address: %q", line)
	}
	for _, path := range []string{"/readyz", "/healthz"} {
		res, err := http.Get("http://" + health + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || string(body) != `{"status":"serving"}`+"\n" {
			t.Errorf("GET %s = %d %q, want 200 serving", path, res.StatusCode, body)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("mathserver after SIGTERM: %v, want exit 0", err)
	}
}

func twoProcesses(t *testing.T, ctx context.Context, dir, kind string) {
	addr, _ := start(t, ctx, dir, "mathserver", "-listen", "127.0.0.1:0", "-transport", kind)
	out, err := exec.CommandContext(ctx, filepath.Join(dir, "mathcaller"), "-peers", addr, "-transport", kind).CombinedOutput()
	if err != nil {
		t.Fatalf("mathcaller: %v\n%s", err, out)
	}
	if string(out) != wantOutput {
		t.Errorf("mathcaller printed:\n%s\nwant:\n%s", out, wantOutput)
	}
}

// serverLogs (finding 8): a server logs warnings to its standard error,
// with the remote address: here a connection that fails the handshake.
// Before, the example servers configured no logger and said nothing.
func serverLogs(t *testing.T, ctx context.Context, dir string) {
	var stderr syncBuffer
	addr, _ := startTo(t, ctx, &stderr, dir, "mathserver", "-listen", "127.0.0.1:0")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	c.SetReadDeadline(time.Now().Add(time.Minute))
	io.Copy(io.Discard, c) // until the server closes it
	want := []string{"level=WARN", "bad handshake magic", "remote=" + c.LocalAddr().String()}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) { // polling, not synchronisation
		if logged := stderr.String(); containsAll(logged, want) {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("the server's standard error has no line with %q:\n%s", want, logged)
		}
	}
}

func containsAll(s string, subs []string) bool {
	for line := range strings.Lines(s) {
		all := true
		for _, sub := range subs {
			all = all && strings.Contains(line, sub)
		}
		if all {
			return true
		}
	}
	return false
}

// syncBuffer is a bytes.Buffer safe for a process's writes and the test's
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
