package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/pluginpb"

	"github.com/wizardmesh/wizard/internal/testkit/need"
)

// TestCompileAndRoundTrip proves that the stubs of every case that
// generates compile with protoc-gen-go's code, that the wellknown case (a
// contract from outside the examples: its own package, several services,
// well-known types) round-trips calls through a runtime.Node, that the
// streaming case streams each kind, in-process and over TCP, and that the
// events case's helpers emit, broadcast and subscribe over TCP. It generates
// in-process into a temporary module that requires this one through a
// replace directive, adds testdata/<case>/*_test.go, and runs go vet and go
// test there.
func TestCompileAndRoundTrip(t *testing.T) {
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
	tmp := t.TempDir()

	// protoc-gen-go at the version go.mod pins, run as protoc would.
	protocGenGo := filepath.Join(tmp, "protoc-gen-go")
	goCmd(t, root, goTool, "build", "-o", protocGenGo, "google.golang.org/protobuf/cmd/protoc-gen-go")

	mod := filepath.Join(tmp, "mod")
	const modulePath = "example.com/golden"
	param := "module=" + modulePath
	var generated []string
	for _, dir := range cases(t) {
		if strings.HasPrefix(filepath.Base(dir), "error_") {
			continue
		}
		req := caseRequest(t, dir, param)
		write(t, mod, runPlugin(t, protocGenGo, req))
		res := run(req)
		write(t, mod, res)
		for _, f := range res.GetFile() {
			generated = append(generated, f.GetName())
		}
		tests, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, src := range tests {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			// The test goes into the case's package directory, the one its
			// go_package names (example.com/golden/<case>).
			dst := filepath.Join(mod, filepath.Base(dir), filepath.Base(src))
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !containsAll(generated, "basic/input_wizard.pb.go", "wellknown/input_wizard.pb.go", "streaming/input_wizard.pb.go", "events/input_wizard.pb.go") {
		t.Fatalf("generated %v; want the basic, wellknown, streaming and events stubs", generated)
	}

	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	goMod := fmt.Sprintf(`module %s

go 1.26

require github.com/wizardmesh/wizard v0.0.0

replace github.com/wizardmesh/wizard => %s
`, modulePath, root)
	for name, content := range map[string][]byte{"go.mod": []byte(goMod), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(mod, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goCmd(t, mod, goTool, "mod", "tidy")
	goCmd(t, mod, goTool, "vet", "./...")
	out := goCmd(t, mod, goTool, "test", "-count=1", "-v", "./...")
	for _, test := range []string{"TestRoundTrip", "TestStreams", "TestEvents", "TestEventsInProcess", "TestEventsNil"} {
		if !strings.Contains(out, "--- PASS: "+test) {
			t.Errorf("%s did not run in the generated module:\n%s", test, out)
		}
	}
}

// goCmd runs the go tool in dir and returns its output; it fails the test
// on an error.
func goCmd(t *testing.T, dir, goTool string, args ...string) string {
	t.Helper()
	cmd := exec.Command(goTool, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// runPlugin runs the plugin binary at path on req.
func runPlugin(t *testing.T, path string, req *pluginpb.CodeGeneratorRequest) *pluginpb.CodeGeneratorResponse {
	t.Helper()
	in, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	res := new(pluginpb.CodeGeneratorResponse)
	if err := proto.Unmarshal(out, res); err != nil {
		t.Fatal(err)
	}
	return res
}

// write stores the files of res under dir.
func write(t *testing.T, dir string, res *pluginpb.CodeGeneratorResponse) {
	t.Helper()
	if res.Error != nil {
		t.Fatalf("generation failed: %s", res.GetError())
	}
	for _, f := range res.GetFile() {
		name := filepath.Join(dir, filepath.FromSlash(f.GetName()))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(f.GetContent()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func containsAll(have []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}
