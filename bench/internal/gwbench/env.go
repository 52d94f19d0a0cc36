package gwbench

import (
	"os/exec"
	"runtime"
	"strings"
)

// Env describes the machine and the code measured.
type Env struct {
	GoVersion string
	CPU       string
	NumCPU    int
	Node      string // node --version, "" without Node.js
	Commit    string // of the repository, "+dirty" when its tree has changes
	LoadStart string // the 1, 5 and 15 minute load averages at the start
}

func environment() Env {
	e := Env{GoVersion: runtime.Version(), NumCPU: runtime.NumCPU(), CPU: cpuModel(), LoadStart: loadAverage()}
	if out, err := exec.Command("node", "--version").Output(); err == nil {
		e.Node = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		e.Commit = strings.TrimSpace(string(out))
		if out, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(out) > 0 {
			e.Commit += "+dirty"
		}
	}
	return e
}
