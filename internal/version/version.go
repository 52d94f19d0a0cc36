// Package version is what the wizard command's version subcommand and
// wizard-gateway's --version print: the release of wizard
// ([runtime.Version]), with the commit and Go version the toolchain embeds
// in the binary.
package version

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/wizardmesh/wizard/runtime"
)

// Release is the version of wizard this tree is: [runtime.Version], the
// one place it is written. A release changes that constant and adds its
// section to CHANGELOG.md in one commit (TestReleaseInChangelog checks that
// they agree).
const Release = "v" + runtime.Version

// Module is the path of the module wizard is.
const Module = "github.com/wizardmesh/wizard"

// Info is what a binary knows of the wizard it was built from.
type Info struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

// Read returns the release and what the Go toolchain embedded in the
// running binary: the commit, its time and whether the work tree had
// changes (empty under go run, outside a checkout or with -buildvcs=false),
// and the Go version.
func Read() Info {
	v := Info{Module: Module, Version: Release, Go: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Go = bi.GoVersion
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// Write prints v as three lines, the first naming the program:
//
//	wizard v0.4.0
//	commit 4d3da3f… (modified), 2026-12-02T00:25:46Z
//	go     go1.26.8
func (v Info) Write(w io.Writer, program string) {
	fmt.Fprintf(w, "%s %s\n", program, v.Version)
	if v.Commit == "" {
		fmt.Fprintf(w, "commit unknown (go run, a build outside a checkout, or -buildvcs=false)\n")
	} else {
		mod := ""
		if v.Modified {
			mod = " (modified)"
		}
		fmt.Fprintf(w, "commit %s%s", v.Commit, mod)
		if v.Time != "" {
			fmt.Fprintf(w, ", %s", v.Time)
		}
		fmt.Fprintf(w, "\n")
	}
	fmt.Fprintf(w, "go     %s\n", v.Go)
}
