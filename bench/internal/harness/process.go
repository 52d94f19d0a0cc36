package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
)

// child is a server process started by [startChild].
type child struct {
	*benchkit.Proc
	spec ServerSpec
	addr string
}

// startChild re-executes the running binary as the server spec describes
// and waits for it to print its address.
func startChild(ctx context.Context, spec ServerSpec, stderr io.Writer) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envServer+"="+string(js))
	p, err := benchkit.Start(ctx, "server "+spec.Contender+"/"+spec.Role, cmd, benchkit.Options{Stderr: stderr, Addr: true})
	if err != nil {
		return nil, err
	}
	return &child{Proc: p, spec: spec, addr: p.Addr()}, nil
}

// served asks the child how many calls its handler has answered.
func (c *child) served(ctx context.Context) (uint64, error) {
	l, err := c.Ask(ctx, queryServed, 5*time.Second)
	if err != nil {
		return 0, err
	}
	n, ok := strings.CutPrefix(l, answerServed)
	if !ok {
		return 0, fmt.Errorf("%s answered %q to %q", c.Name(), l, queryServed)
	}
	return strconv.ParseUint(n, 10, 64)
}

// stop closes the child's stdin, which makes it shut down, and kills it if
// it has not exited within 10 s.
func (c *child) stop() error { return c.Stop() }
