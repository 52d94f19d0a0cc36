package main

import (
	"context"

	"github.com/wizardmesh/wizard/internal/version"
)

// versionCommand is 'wizard version', listed in [commands].
var versionCommand = &command{
	name: "version",
	summary: `Print the version of wizard this command was built from: the release,
the commit and whether the work tree had changes, and the Go version that
built it.`,
	example: `wizard version
wizard version --output json`,
	run: runVersion,
}

func runVersion(_ context.Context, c *cli, args []string, _ any) error {
	if err := wantArgs("version", args, 0, 0, ""); err != nil {
		return err
	}
	v := version.Read()
	if c.json {
		c.printJSON(v)
		return nil
	}
	v.Write(c.io.out, "wizard")
	return nil
}
