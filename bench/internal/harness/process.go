package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// child is a server process started by [startChild].
type child struct {
	spec  ServerSpec
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
	done  chan struct{}
	err   error // of Wait, once done is closed
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
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{spec: spec, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(s)
		io.Copy(io.Discard, stdout)
	}()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	select {
	case c.addr = <-line:
		if c.addr != "" {
			return c, nil
		}
		<-c.done
		return nil, fmt.Errorf("server %s/%s exited: %v", spec.Contender, spec.Role, c.err)
	case <-ctx.Done():
		c.stop()
		return nil, fmt.Errorf("server %s/%s did not start: %w", spec.Contender, spec.Role, ctx.Err())
	}
}

// stop closes the child's stdin, which makes it shut down, and kills it if
// it has not exited within 10 s.
func (c *child) stop() error {
	c.stdin.Close()
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		c.cmd.Process.Kill()
		<-c.done
		return fmt.Errorf("server %s/%s did not stop in 10s; killed", c.spec.Contender, c.spec.Role)
	}
	if c.err != nil {
		return fmt.Errorf("server %s/%s: %w", c.spec.Contender, c.spec.Role, c.err)
	}
	return nil
}
