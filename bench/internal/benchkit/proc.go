package benchkit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Proc is a process started by [Start]. Its protocol is a line each way:
// it may print its address as its first line, and it answers each query
// written on its stdin with one line; closing its stdin asks it to stop.
type Proc struct {
	name      string
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	addr      string
	lines     chan string // the lines after the first: answers to queries
	done      chan struct{}
	err       error // of Wait, once done is closed
	interrupt bool

	askMu sync.Mutex // one query at a time
}

// Options says how [Start] starts a process.
type Options struct {
	// Stderr receives the process's standard error.
	Stderr io.Writer
	// Addr makes Start wait for the process's first line of output,
	// its address (see [Proc.Addr]), for at most AddrTimeout (30 s when
	// zero).
	Addr        bool
	AddrTimeout time.Duration
	// Interrupt makes [Proc.Stop] send os.Interrupt after closing stdin,
	// for processes that stop on a signal rather than on end of input, and
	// take an exit by that signal as a clean stop.
	Interrupt bool
}

// Start starts cmd, named name in errors, as o says.
func Start(ctx context.Context, name string, cmd *exec.Cmd, o Options) (*Proc, error) {
	cmd.Stderr = o.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	var stdout io.ReadCloser
	if o.Addr {
		if stdout, err = cmd.StdoutPipe(); err != nil {
			return nil, err
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &Proc{name: name, cmd: cmd, stdin: stdin, lines: make(chan string, 16), done: make(chan struct{}), interrupt: o.Interrupt}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	if !o.Addr {
		return p, nil
	}
	first := make(chan string, 1)
	go func() {
		br := bufio.NewReader(stdout)
		s, _ := br.ReadString('\n')
		first <- strings.TrimSpace(s)
		for {
			s, err := br.ReadString('\n')
			if err != nil {
				return
			}
			select {
			case p.lines <- strings.TrimSpace(s):
			default: // nobody asked: dropped
			}
		}
	}()
	timeout := o.AddrTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case p.addr = <-first:
		if p.addr != "" {
			return p, nil
		}
		<-p.done
		return nil, fmt.Errorf("%s exited before printing its address: %v", name, p.err)
	case <-ctx.Done():
		p.Stop()
		return nil, fmt.Errorf("%s did not print its address: %w", name, ctx.Err())
	}
}

// Name returns the name the process was started with.
func (p *Proc) Name() string { return p.name }

// Addr returns the process's first line of output, when [Options.Addr]
// asked for it.
func (p *Proc) Addr() string { return p.addr }

// Pid returns the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited; [Proc.Err] then returns
// how.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err returns the error of the process's exit (nil for a clean one), once
// [Proc.Done] is closed.
func (p *Proc) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Ask writes query q on the process's stdin and returns its answer line,
// waiting at most timeout.
func (p *Proc) Ask(ctx context.Context, q string, timeout time.Duration) (string, error) {
	p.askMu.Lock()
	defer p.askMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := io.WriteString(p.stdin, q+"\n"); err != nil {
		return "", fmt.Errorf("%s: %w", p.name, err)
	}
	select {
	case l := <-p.lines:
		return l, nil
	case <-p.done:
		return "", fmt.Errorf("%s exited: %v", p.name, p.err)
	case <-ctx.Done():
		return "", fmt.Errorf("%s: no answer to %q: %w", p.name, q, ctx.Err())
	}
}

// Stop asks the process to stop (stdin closed; with [Options.Interrupt]
// also os.Interrupt) and kills it if it has not exited within 10 s. It
// returns an error if the process had to be killed or exited with one.
func (p *Proc) Stop() error {
	p.stdin.Close()
	if p.interrupt {
		p.cmd.Process.Signal(os.Interrupt)
	}
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop in 10s; killed", p.name)
	}
	if p.err == nil {
		return nil
	}
	var ee *exec.ExitError
	if p.interrupt && errors.As(p.err, &ee) && !ee.Exited() {
		return nil // ended by the signal Stop sent
	}
	return fmt.Errorf("%s: %w", p.name, p.err)
}
