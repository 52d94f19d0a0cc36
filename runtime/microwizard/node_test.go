package microwizard_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/internal/testkit/need"
)

// nodeDir holds the Node.js packages the tests run (npm ci installs them).
const nodeDir = "testdata/node"

// needNode skips t (fails it with WIZARD_REQUIRE=1) unless node is on the
// PATH and the packages of nodeDir are installed.
func needNode(t testing.TB, pkg string) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		need.Skipf(t, "node is not on the PATH: install Node.js 20+ to run the MicroWizard and Seneca tests")
	}
	if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", pkg, "package.json")); err != nil {
		need.Skipf(t, "%s is not installed: run npm ci --prefix runtime/microwizard/%s", pkg, nodeDir)
	}
}

// nodeProc is a Node.js process a test started: its stdout, line by line.
type nodeProc struct {
	cmd   *exec.Cmd
	lines chan []byte
	stdin io.WriteCloser
}

// startNode runs node script args in nodeDir until the test ends.
func startNode(t testing.TB, script string, args ...string) *nodeProc {
	t.Helper()
	cmd := exec.Command("node", append([]string{script}, args...)...)
	cmd.Dir = nodeDir
	cmd.Stderr = testWriter{t}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node %s: %v", script, err)
	}
	p := &nodeProc{cmd: cmd, lines: make(chan []byte, 64), stdin: in}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	t.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return p
}

// next decodes the process's next JSON line into v, within 30 s. Lines
// that are not a JSON object (MicroWizard logs to stdout) are logged and
// skipped.
func (p *nodeProc) next(t testing.TB, v any) {
	t.Helper()
	guard := time.NewTimer(30 * time.Second)
	defer guard.Stop()
	for {
		select {
		case b, ok := <-p.lines:
			if !ok {
				t.Fatal("node process ended before printing the line expected")
			}
			if len(b) == 0 || b[0] != '{' {
				t.Logf("node: %s", b)
				continue
			}
			if err := json.Unmarshal(b, v); err != nil {
				t.Fatalf("node printed %q: %v", b, err)
			}
			return
		case <-guard.C:
			t.Fatal("no line from the node process within 30 s")
		}
	}
}

// testWriter logs what a process writes to stderr.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Logf("node: %s", b)
	return len(b), nil
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
