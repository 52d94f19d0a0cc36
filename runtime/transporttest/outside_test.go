package transporttest_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/internal/testkit/outside"
)

// TestOutsideModule runs memory_test.go, the in-memory transport and its
// conformance test, from a module of its own, example.com/memtransport,
// that requires this checkout: there the runtime's internal packages
// cannot be imported, so the transport and the suite pass with the
// public API alone. It skips in -short mode, and without the go tool or
// offline unless WIZARD_REQUIRE=1.
func TestOutsideModule(t *testing.T) {
	goTool, root := outside.Tools(t)
	src, err := os.ReadFile("memory_test.go")
	if err != nil {
		t.Fatal(err)
	}
	src = bytes.Replace(src, []byte("package transporttest_test\n"), []byte("package memtransport_test\n"), 1)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	for name, content := range map[string][]byte{
		"go.mod":         []byte("module example.com/memtransport\n\ngo 1.26.0\n\nrequire github.com/wizardmesh/wizard v0.0.0\n\nreplace github.com/wizardmesh/wizard => " + root + "\n"),
		"go.sum":         sum,
		"memory_test.go": src,
	} {
		if err := os.WriteFile(filepath.Join(mod, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	env := outside.Env(t, goTool)
	outside.Run(t, ctx, mod, env, goTool, "mod", "tidy")
	outside.Run(t, ctx, mod, env, goTool, "test", "-count=1", "-run", "^TestMemory$", ".")
}
