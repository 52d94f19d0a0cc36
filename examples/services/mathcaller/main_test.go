package main_test

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTwoProcesses builds mathserver and mathcaller, runs them as two OS
// processes on 127.0.0.1, over TCP and over QUIC, and checks the caller's
// answers.
func TestTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs two binaries")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	for _, name := range []string{"mathserver", "mathcaller"} {
		build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, name), "../"+name)
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
	}

	for _, kind := range []string{"tcp", "quic"} {
		t.Run(kind, func(t *testing.T) { twoProcesses(t, ctx, dir, kind) })
	}
}

func twoProcesses(t *testing.T, ctx context.Context, dir, kind string) {
	server := exec.CommandContext(ctx, filepath.Join(dir, "mathserver"), "-listen", "127.0.0.1:0", "-transport", kind)
	stdout, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		server.Process.Kill()
		server.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the server's address: %v", err)
	}
	fields := strings.Fields(line) // mathserver: serving N patterns on KIND ADDR
	addr := fields[len(fields)-1]

	out, err := exec.CommandContext(ctx, filepath.Join(dir, "mathcaller"), "-peers", addr, "-transport", kind).CombinedOutput()
	if err != nil {
		t.Fatalf("mathcaller: %v\n%s", err, out)
	}
	want := "sum(1, 2, 3.5) = 6.5\nproduct(2, 3, 7) = 42\ndivide(1, 0) -> invalid_argument: mathsvc: division of 1 by zero\n"
	if string(out) != want {
		t.Errorf("mathcaller printed:\n%s\nwant:\n%s", out, want)
	}
}
