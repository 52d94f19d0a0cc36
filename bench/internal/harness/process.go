package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// child is a server process started by [startChild].
type child struct {
	spec  ServerSpec
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
	lines chan string // the child's answers to control queries
	done  chan struct{}
	err   error // of Wait, once done is closed

	queryMu sync.Mutex // one control query at a time
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
	c := &child{spec: spec, cmd: cmd, stdin: stdin, lines: make(chan string, 16), done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	line := make(chan string, 1)
	go func() {
		br := bufio.NewReader(stdout)
		s, _ := br.ReadString('\n')
		line <- strings.TrimSpace(s)
		for {
			s, err := br.ReadString('\n')
			if err != nil {
				return
			}
			select {
			case c.lines <- strings.TrimSpace(s):
			default: // nobody asked: dropped
			}
		}
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

// served asks the child how many calls its handler has answered.
func (c *child) served(ctx context.Context) (uint64, error) {
	c.queryMu.Lock()
	defer c.queryMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := io.WriteString(c.stdin, queryServed+"\n"); err != nil {
		return 0, fmt.Errorf("server %s/%s: %w", c.spec.Contender, c.spec.Role, err)
	}
	select {
	case l := <-c.lines:
		n, ok := strings.CutPrefix(l, answerServed)
		if !ok {
			return 0, fmt.Errorf("server %s/%s answered %q to %q", c.spec.Contender, c.spec.Role, l, queryServed)
		}
		return strconv.ParseUint(n, 10, 64)
	case <-c.done:
		return 0, fmt.Errorf("server %s/%s exited: %v", c.spec.Contender, c.spec.Role, c.err)
	case <-ctx.Done():
		return 0, fmt.Errorf("server %s/%s: no answer to %q: %w", c.spec.Contender, c.spec.Role, queryServed, ctx.Err())
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
