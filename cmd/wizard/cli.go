package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/wizardmesh/wizard/cmd/wizard/internal/jsonic"
	"github.com/wizardmesh/wizard/runtime"
)

// cli is one run of a command: its input and output, its flags, and the
// node it joined the mesh with.
type cli struct {
	io   *stdio
	cmd  *command
	fs   *flag.FlagSet
	mesh *meshFlags
	json bool
	// lines: the output is JSON lines (act --stream), an error one more.
	lines bool
	j     *joined
}

func (c *cli) configure() error {
	out := c.fs.Lookup("output").Value.String()
	switch out {
	case "text":
	case "json":
		c.json = true
	default:
		return usagef("--output %q: want text or json", out)
	}
	return nil
}

// node joins the mesh, once, and waits until it knows it.
func (c *cli) node(ctx context.Context) (*runtime.Node, error) {
	if c.j != nil {
		return c.j.node, nil
	}
	j, err := c.mesh.join(c.io.err, "")
	if err != nil {
		return nil, err
	}
	c.j = j
	if err := c.settle(ctx); err != nil {
		return nil, err
	}
	return j.node, nil
}

// settle waits, within --timeout, until the node joined knows the mesh.
func (c *cli) settle(ctx context.Context) error {
	j := c.j
	ctx, cancel := context.WithTimeout(ctx, *c.mesh.timeout)
	defer cancel()
	return j.settle(ctx)
}

func (c *cli) close() {
	if c.j != nil {
		c.j.close()
	}
}

// fail prints err, if any, and returns the exit status.
func (c *cli) fail(err error) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, errFailed) {
		return 1
	}
	if r, ok := errors.AsType[*reportedError](err); ok {
		return exitStatus(r.err)
	}
	var se *jsonic.SyntaxError
	code := exitStatus(err)
	if c.json {
		c.printJSON(errorJSON(err))
		return code
	}
	fmt.Fprintf(c.io.err, "wizard %s: %s\n", c.cmd.name, errorText(err))
	if errors.As(err, &se) {
		fmt.Fprintln(c.io.err, indent(se.Caret()))
	}
	return code
}

// reportedError is an error the command has printed already, in its own
// output (wizard emit's --output json): it sets the exit status alone.
type reportedError struct{ err error }

func (e *reportedError) Error() string { return e.err.Error() }
func (e *reportedError) Unwrap() error { return e.err }

// codedExit is added to the code of a coded error to make the exit
// status (invalid_argument 67, not_found 69, unavailable 78), as grpcurl
// does with gRPC codes; the codes are gRPC's numbers.
const codedExit = 64

// exitStatus is the exit status of a command that failed with err: 2 for
// bad usage or input, codedExit plus the code for a coded error (a call,
// or a mesh that could not be joined), else 1.
func exitStatus(err error) int {
	var ue *usageError
	var se *jsonic.SyntaxError
	var ie *inputError
	var e *runtime.Error
	switch {
	case errors.As(err, &ue) || errors.As(err, &se) || errors.As(err, &ie):
		return 2
	case errors.As(err, &e):
		return codedExit + int(e.Code)
	}
	return 1
}

// errorText is err for a person: a coded error with its code first.
func errorText(err error) string {
	var ie *inputError
	if errors.As(err, &ie) {
		return ie.what + ": " + errorText(ie.err)
	}
	var e *runtime.Error
	if errors.As(err, &e) {
		return e.Code.String() + ": " + strings.TrimPrefix(e.Message, "wizard: ")
	}
	return err.Error()
}

// errorJSON is err as --output json prints it.
func errorJSON(err error) any {
	type body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Offset  *int   `json:"offset,omitempty"`
	}
	b := body{Code: runtime.CodeOf(err).String(), Message: err.Error()}
	var e *runtime.Error
	var ue *usageError
	var se *jsonic.SyntaxError
	var ie *inputError
	switch {
	case errors.As(err, &se):
		b.Code, b.Offset, b.Message = "invalid_argument", &se.Offset, err.Error()
	case errors.As(err, &ie):
		b.Code, b.Message = "invalid_argument", errorText(err)
	case errors.As(err, &e):
		b.Message = e.Message
	case errors.As(err, &ue):
		b.Code = "invalid_argument"
	}
	return map[string]any{"error": b}
}

func (c *cli) printJSON(v any) {
	marshal := func(v any) ([]byte, error) { return json.MarshalIndent(v, "", "  ") }
	if c.lines {
		marshal = json.Marshal
	}
	b, err := marshal(v)
	if err != nil {
		fmt.Fprintf(c.io.err, "wizard %s: %v\n", c.cmd.name, err)
		return
	}
	c.io.out.Write(append(b, '\n'))
}

func (c *cli) printf(format string, args ...any) { fmt.Fprintf(c.io.out, format, args...) }

// wantArgs checks the count of positional arguments.
func wantArgs(cmd string, args []string, min, max int, what string) error {
	switch {
	case len(args) < min:
		return usagef("missing %s; see 'wizard help %s'", what, cmd)
	case len(args) > max:
		return usagef("unexpected argument %q; see 'wizard help %s'", args[max], cmd)
	}
	return nil
}

func (c *cli) fprintf(w io.Writer, format string, args ...any) { fmt.Fprintf(w, format, args...) }

// wizardModule is the path of the module wizard belongs to.
const wizardModule = "github.com/wizardmesh/wizard"

// moduleVersion is the version of wizard this command was built from.
func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	if bi.Main.Path == wizardModule {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == wizardModule {
			return d.Version
		}
	}
	return ""
}
