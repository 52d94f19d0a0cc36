package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// prepare readies every contender of cs that needs something outside Go
// and returns those that can run; each one skipped is logged and recorded
// in rep.Gaps with the reason, never dropped silently.
func prepare(ctx context.Context, cs []Contender, rep *Report, logf func(string, ...any)) []Contender {
	var out []Contender
	for _, c := range cs {
		if c.Prepare != nil {
			if why := c.Prepare(ctx); why != "" {
				logf("%-14s skipped: %s", c.Title, why)
				rep.Gaps = append(rep.Gaps, Gap{Title: c.Title, Reason: why})
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

// driverClient holds a [Driver] where the harness keeps its clients.
type driverClient struct{ d Driver }

func (driverClient) Call(context.Context, float64, float64) (float64, error) {
	return 0, errors.New("harness: a driven contender has no Go client")
}

func (c driverClient) Close() error { return c.d.Close() }

// dialContender connects to the server of c at addr: its Driver when it
// has one, else its Go client, checked by a first call.
func dialContender(ctx context.Context, c Contender, addr string) (Client, error) {
	if c.DialDriver != nil {
		d, err := c.DialDriver(ctx, addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Title, err)
		}
		return driverClient{d}, nil
	}
	return dialChecked(ctx, c, addr, DialOptions{})
}

// driveContender measures one run over cl: by the contender's Driver
// when it has one, else by the harness's load loop.
func driveContender(ctx context.Context, _ Contender, cl Client, l Load) (Sample, error) {
	if dc, ok := cl.(driverClient); ok {
		return dc.d.Drive(ctx, l)
	}
	return drive(ctx, cl, l)
}

// benchDir returns the bench module's root: the first directory at or
// above the working directory with go.mod and microwizard/bench.mjs.
func benchDir() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "microwizard", "bench.mjs")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				return d, nil
			}
		}
		p := filepath.Dir(d)
		if p == d {
			return "", errors.New("harness: no bench module (a directory with go.mod and microwizard/bench.mjs) at or above the working directory")
		}
		d = p
	}
}

// nodeDir returns the folder sub of the bench module (its Node.js
// packages and scripts).
func nodeDir(sub string) (string, error) {
	d, err := benchDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, sub), nil
}

// npmOnce runs npm ci at most once per folder and process.
var npmOnce sync.Map // folder -> *npmResult

type npmResult struct {
	once sync.Once
	why  string
}

// prepareNode finds node and, when the folder sub's node_modules is
// missing or older than its lock file, installs the locked packages with
// npm ci (scripts run: MicroWizard's farmhash is built by node-gyp). It
// returns why the folder's scripts cannot run, or "".
func prepareNode(ctx context.Context, sub string) string {
	if _, err := exec.LookPath("node"); err != nil {
		return "no node on PATH (Node.js is needed: apt-get install nodejs npm)"
	}
	dir, err := nodeDir(sub)
	if err != nil {
		return err.Error()
	}
	r, _ := npmOnce.LoadOrStore(dir, &npmResult{})
	res := r.(*npmResult)
	res.once.Do(func() { res.why = npmCI(ctx, dir) })
	return res.why
}

func npmCI(ctx context.Context, dir string) string {
	lock, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return "no " + filepath.Join(dir, "package-lock.json")
	}
	if inst, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err == nil && !inst.ModTime().Before(lock.ModTime()) {
		return ""
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "no npm on PATH to install " + filepath.Join(dir, "node_modules") + " (apt-get install npm)"
	}
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Sprintf("npm ci in %s failed: %v: %s", dir, err, strings.TrimSpace(string(b)))
	}
	return ""
}

// nodeServer is a Node.js server process started by a contender's Serve
// in the harness's server process: it prints its address on its first
// line and stops when its standard input ends.
type nodeServer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
	done  chan struct{}
}

// startNodeServer runs node with args in the folder sub, env added to
// the environment, and waits up to 30 s for its address.
func startNodeServer(sub string, env []string, args ...string) (*nodeServer, error) {
	dir, err := nodeDir(sub)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("node", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "NODE_ENV=production"), env...)
	cmd.Stderr = os.Stderr
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
	s := &nodeServer{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	line := make(chan string, 1)
	go func() {
		br := bufio.NewReader(stdout)
		l, _ := br.ReadString('\n')
		line <- strings.TrimSpace(l)
		io.Copy(io.Discard, br)
	}()
	go func() {
		cmd.Wait()
		close(s.done)
	}()
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case s.addr = <-line:
		if s.addr != "" {
			return s, nil
		}
		<-s.done
		return nil, fmt.Errorf("node %s in %s exited: %v", strings.Join(args, " "), dir, cmd.ProcessState)
	case <-t.C:
		s.Close()
		return nil, fmt.Errorf("node %s in %s printed no address in 30s", strings.Join(args, " "), dir)
	}
}

func (s *nodeServer) Addr() string { return s.addr }

// Close ends the process's standard input and kills it if it has not
// exited within 5 s.
func (s *nodeServer) Close() error {
	s.stdin.Close()
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-s.done:
		return nil
	case <-t.C:
		s.cmd.Process.Kill()
		<-s.done
		return errors.New("node server did not stop in 5s; killed")
	}
}

// nodeSample is what the Node.js scripts' drive prints.
type nodeSample struct {
	Calls    int    `json:"calls"`
	WindowNs int64  `json:"windowNs"`
	Errors   int    `json:"errors"`
	FirstErr string `json:"firstErr"`
	P50Ns    int64  `json:"p50Ns"`
	P99Ns    int64  `json:"p99Ns"`
}

// nodeLoadArgs are the arguments the scripts' load and inproc roles take
// after their own: callers, warm-up and duration in ms, most calls.
func nodeLoadArgs(l Load) []string {
	return []string{strconv.Itoa(l.Callers), strconv.FormatInt(l.Warmup.Milliseconds(), 10),
		strconv.FormatInt(l.Duration.Milliseconds(), 10), strconv.FormatInt(l.MaxCalls, 10)}
}

// nodeDriver is a Node.js client process that drives runs: it prints
// "ready" once connected, then answers each line "callers warmup_ms
// duration_ms max_calls" of its standard input with one JSON sample.
type nodeDriver struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	done   chan struct{}
	stderr *strings.Builder
	what   string
}

// startNodeDriver runs node with args in the folder sub, env added, and
// waits up to 30 s for it to be ready.
func startNodeDriver(ctx context.Context, sub string, env []string, args ...string) (*nodeDriver, error) {
	dir, err := nodeDir(sub)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("node", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "NODE_ENV=production"), env...)
	d := &nodeDriver{cmd: cmd, lines: make(chan string, 1), done: make(chan struct{}), stderr: new(strings.Builder),
		what: "node " + strings.Join(args, " ")}
	cmd.Stderr = d.stderr // read once done: Wait has finished copying
	if d.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case d.lines <- sc.Text():
			case <-d.done:
				return
			}
		}
	}()
	go func() {
		cmd.Wait()
		close(d.done)
	}()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l, err := d.next(ctx)
	if err == nil && l != "ready" {
		err = fmt.Errorf("%s printed %q, want ready", d.what, l)
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// next returns the driver's next line of output.
func (d *nodeDriver) next(ctx context.Context) (string, error) {
	select {
	case l := <-d.lines:
		return l, nil
	case <-d.done:
		return "", fmt.Errorf("%s exited: %v: %s", d.what, d.cmd.ProcessState, strings.TrimSpace(d.stderr.String()))
	case <-ctx.Done():
		return "", fmt.Errorf("%s: %w", d.what, ctx.Err())
	}
}

// Drive asks the process for one run and returns what it measured.
func (d *nodeDriver) Drive(ctx context.Context, l Load) (Sample, error) {
	grace := l.Grace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second+l.Warmup+l.Duration+grace)
	defer cancel()
	if _, err := io.WriteString(d.stdin, strings.Join(nodeLoadArgs(l), " ")+"\n"); err != nil {
		return Sample{}, fmt.Errorf("%s: %w", d.what, err)
	}
	line, err := d.next(ctx)
	if err != nil {
		return Sample{}, err
	}
	return parseNodeSample(d.what, []byte(line))
}

// Close ends the process's standard input and kills it if it has not
// exited within 5 s.
func (d *nodeDriver) Close() error {
	d.stdin.Close()
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-d.done:
		return nil
	case <-t.C:
		d.cmd.Process.Kill()
		<-d.done
		return fmt.Errorf("%s did not stop in 5s; killed", d.what)
	}
}

// parseNodeSample decodes the JSON sample a Node.js script printed.
func parseNodeSample(what string, b []byte) (Sample, error) {
	var ns nodeSample
	if err := json.Unmarshal(b, &ns); err != nil {
		return Sample{}, fmt.Errorf("%s printed %q: %v", what, b, err)
	}
	if ns.Calls < 0 || ns.Errors < 0 || ns.WindowNs < 0 || ns.P50Ns < 0 || ns.P99Ns < ns.P50Ns {
		return Sample{}, fmt.Errorf("%s printed an impossible sample %q", what, b)
	}
	s := Sample{Calls: ns.Calls, Errors: ns.Errors, Window: time.Duration(ns.WindowNs),
		P50: time.Duration(ns.P50Ns), P99: time.Duration(ns.P99Ns)}
	if ns.FirstErr != "" {
		s.FirstErr = errors.New(ns.FirstErr)
	}
	if s.Window > 0 {
		s.PerSec = float64(s.Calls) / s.Window.Seconds()
	}
	return s, nil
}

// runNodeLoad runs a Node.js script that drives a run itself and returns
// the sample it printed. The process gets 30 s to start and connect on top
// of the run and its grace.
func runNodeLoad(ctx context.Context, sub string, env []string, l Load, args ...string) (Sample, error) {
	dir, err := nodeDir(sub)
	if err != nil {
		return Sample{}, err
	}
	grace := l.Grace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second+l.Warmup+l.Duration+grace)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "NODE_ENV=production"), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Sample{}, fmt.Errorf("node %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return parseNodeSample("node "+strings.Join(args, " "), bytes.TrimSpace(out))
}

// PrepareNode is [prepareNode] for the bench module's other packages:
// it finds node and installs the folder sub's locked packages when they
// are missing, and returns why its scripts cannot run, or "".
func PrepareNode(ctx context.Context, sub string) string { return prepareNode(ctx, sub) }

// NodeDir returns the bench module's folder sub (its Node.js packages
// and scripts).
func NodeDir(sub string) (string, error) { return nodeDir(sub) }
