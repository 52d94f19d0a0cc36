package main

import (
	"cmp"
	"context"
	"runtime/debug"
)

// versionCommand is 'wizard version', listed in [commands].
var versionCommand = &command{
	name: "version",
	summary: `Print the version of wizard this command was built from: the module
version ("(devel)" for a build from a checkout), the commit and whether the
work tree had changes, and the Go version that built it.`,
	example: `wizard version
wizard version --output json`,
	run: runVersion,
}

// versionJSON is the build of this command as --output json prints it.
type versionJSON struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

// buildVersion reads the build information the Go toolchain embeds.
func buildVersion() versionJSON {
	v := versionJSON{Module: wizardModule, Version: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Version, v.Go = cmp.Or(moduleVersion(), "unknown"), bi.GoVersion
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

func runVersion(_ context.Context, c *cli, args []string, _ any) error {
	if err := wantArgs("version", args, 0, 0, ""); err != nil {
		return err
	}
	v := buildVersion()
	if c.json {
		c.printJSON(v)
		return nil
	}
	c.printf("wizard %s\n", v.Version)
	if v.Commit == "" {
		c.printf("commit unknown (built outside a checkout, or with -buildvcs=false)\n")
	} else {
		mod := ""
		if v.Modified {
			mod = " (modified)"
		}
		c.printf("commit %s%s", v.Commit, mod)
		if v.Time != "" {
			c.printf(", %s", v.Time)
		}
		c.printf("\n")
	}
	c.printf("go     %s\n", v.Go)
	return nil
}
