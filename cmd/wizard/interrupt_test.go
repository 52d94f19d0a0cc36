package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// buildWizard builds this command into a temporary directory.
func buildWizard(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "wizard")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestInterrupt: Ctrl-C (SIGINT) on a wizard act process cancels the call
// in flight — the remote handler's ctx ends — and the process exits 130.
func TestInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	bin := buildWizard(t)
	entered, ended := make(chan struct{}, 1), make(chan error, 1)
	tr, err := tcp.New()
	if err != nil {
		t.Fatal(err)
	}
	n, err := runtime.New(runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"), runtime.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if err := n.Add("role:hang", func(ctx context.Context, r runtime.Request) (any, error) {
		entered <- struct{}{}
		<-ctx.Done()
		ended <- context.Cause(ctx)
		return nil, ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "act", "--peers", n.Addr(), "--timeout", "60s", "--verbose", "role:hang", "{}")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	select {
	case <-entered:
	case <-time.After(30 * time.Second): // a guard
		t.Fatalf("the call never reached the handler; stderr: %s", stderr.String())
	}
	start := time.Now()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-ended:
		t.Logf("the handler's ctx ended %v after SIGINT: %v", time.Since(start), cause)
	case <-time.After(30 * time.Second): // a guard
		werr := cmd.Wait()
		t.Fatalf("the handler's ctx did not end after SIGINT; wizard: %v\nstderr: %s", werr, stderr.String())
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).ExitStatus() != 130 {
		t.Errorf("wizard act after SIGINT: %v; want exit status 130\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q; want nothing", stdout.String())
	}
	t.Logf("stderr: %s", stderr.String())
}
