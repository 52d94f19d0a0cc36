package need

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Buf returns the buf binary: on PATH, or where `make buf` installs it
// (CI sets GOBIN to the checkout's bin/ under root; otherwise
// GOPATH/bin of goTool). Without one it [Skipf]s t.
func Buf(t testing.TB, root, goTool string) string {
	t.Helper()
	if p, err := exec.LookPath("buf"); err == nil {
		return p
	}
	candidates := []string{filepath.Join(root, "bin", "buf")}
	if out, err := exec.Command(goTool, "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			candidates = append(candidates, filepath.Join(dir, "bin", "buf"))
		}
	}
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			return c
		}
	}
	Skipf(t, "needs buf (make buf installs it); looked on PATH and in %s", strings.Join(candidates, ", "))
	return ""
}
