package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/internal/testkit/need"
)

// TestInit runs wizard init in a temporary directory, then buf generate,
// go mod tidy and go build, starts the scaffolded server and calls it
// with wizard act. It needs buf and the go tool (the module cache first in
// GOPROXY, the checkout as the wizard module); without them it skips,
// unless WIZARD_REQUIRE=1.
func TestInit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module: skipped in -short mode")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		need.Skipf(t, "needs the go tool on PATH: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bufTool := need.Buf(t, root, goTool)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	dir := filepath.Join(t.TempDir(), "hello")
	env := moduleEnv(t, goTool)
	for k, v := range env {
		t.Setenv(k, v)
	}
	r := wizard(t, "", "init", "--module", "example.com/hello", "--replace", root, dir)
	if r.code != 0 {
		t.Fatalf("init: exit %d\n%s%s", r.code, r.out, r.err)
	}
	for _, f := range []string{"buf.yaml", "buf.gen.yaml", "proto/greet/v1/greet.proto", "proto/wizard/v1/options.proto", "main.go", "go.mod"} {
		if !fileExists(filepath.Join(dir, f)) {
			t.Errorf("init wrote no %s", f)
		}
	}
	for _, args := range [][]string{{bufTool, "generate"}, {goTool, "mod", "tidy"}, {goTool, "build", "-o", "bin/", "./..."}} {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			if networkError.Match(out) {
				need.Skipf(t, "%s: offline: %s", strings.Join(args, " "), out)
			}
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	server := exec.CommandContext(ctx, filepath.Join(dir, "bin", "hello"))
	stdout, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		server.Process.Signal(os.Interrupt)
		server.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the server's address: %v", err)
	}
	addr := strings.TrimSuffix(strings.Fields(line)[2], ";")
	r = wizard(t, "", "act", "--peers", addr, "role:greet,cmd:shout", "name:ada")
	if r.code != 0 || !strings.Contains(r.out, `"greeting": "HELLO, ADA!"`) {
		t.Errorf("act on the scaffolded server: exit %d, %s%s", r.code, r.out, r.err)
	}
	r = wizard(t, "", "init", dir)
	if r.code != 2 || !strings.Contains(r.err, "exists already") {
		t.Errorf("init over a scaffold: exit %d, %s; want 2, naming the file that exists", r.code, r.err)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// moduleEnv is the environment of the scaffolded module's go commands:
// no workspace, the module cache as the first proxy.
func moduleEnv(t *testing.T, goTool string) map[string]string {
	out, err := exec.Command(goTool, "env", "GOMODCACHE", "GOPROXY").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	proxy := "file://" + filepath.ToSlash(filepath.Join(lines[0], "cache", "download"))
	if len(lines) > 1 && lines[1] != "" && lines[1] != "off" {
		proxy += "," + lines[1]
	}
	return map[string]string{"GOWORK": "off", "GOPROXY": proxy, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"}
}
