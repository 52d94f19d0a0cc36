// Package outside runs the go tool in a module outside this checkout, as
// a user's module that requires wizard: the tests that prove what such a
// module can build (the README's typed stubs, a transport of its own)
// share it. A replace directive to the checkout stands in for a
// published version; the module cache is the first proxy, so that the
// checkout's dependencies resolve offline as they do for the checkout.
package outside

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wizardmesh/wizard/internal/testkit/need"
)

// Tools returns the go tool and the root of this checkout, the module
// that the outside module requires. It skips t in -short mode (building
// a module takes a while) and, unless need.Required, without the go tool.
func Tools(t testing.TB) (goTool, root string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a module: skipped in -short mode")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		need.Skipf(t, "needs the go tool on PATH: %v", err)
	}
	out, err := exec.Command(goTool, "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return goTool, filepath.Dir(strings.TrimSpace(string(out)))
}

// Env is the environment of the outside module's commands: no
// workspace, and the module cache as the first proxy.
func Env(t testing.TB, goTool string) []string {
	t.Helper()
	out, err := exec.Command(goTool, "env", "GOMODCACHE", "GOPROXY").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("go env GOMODCACHE GOPROXY printed %q", out)
	}
	proxy := fileURL(filepath.Join(lines[0], "cache", "download"))
	if p := lines[1]; p != "" && p != "off" {
		proxy += "," + p
	}
	return append(os.Environ(), "GOWORK=off", "GOPROXY="+proxy, "CGO_ENABLED=0")
}

// fileURL is the file URL of the absolute path p (on Windows, C:\x is
// file:///C:/x).
func fileURL(p string) string {
	p = filepath.ToSlash(p)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return "file://" + p
}

// networkError matches what the go tool prints when it cannot reach a
// proxy or the checksum database.
var networkError = regexp.MustCompile(`dial tcp|no such host|network is unreachable|connection refused|i/o timeout|TLS handshake timeout`)

// Run runs args in dir with env and fails the test on an error; an
// error reaching the network skips it instead, unless need.Required.
func Run(t testing.TB, ctx context.Context, dir string, env []string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err == nil {
		return
	}
	step := filepath.Base(args[0]) + " " + strings.Join(args[1:], " ")
	if networkError.Match(out) {
		need.Skipf(t, "%s: offline? %v\n%s", step, err, out)
	}
	t.Fatalf("%s: %v\n%s", step, err, out)
}
