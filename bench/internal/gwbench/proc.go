package gwbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// proc is a process the benchmark started.
type proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string      // the first line it printed, when it prints one
	lines chan string // the lines after it: answers to queries
	done  chan struct{}
	err   error // of Wait, once done is closed
}

// startProc starts cmd. When printsAddr, it waits for the process's first
// line on stdout, which is its address. Closing the process's stdin asks it
// to stop (the children of this package and moleculer/server.js do; the
// gateway is sent SIGTERM).
func startProc(ctx context.Context, name string, cmd *exec.Cmd, printsAddr bool, stderr io.Writer) (*proc, error) {
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	var stdout io.ReadCloser
	if printsAddr {
		if stdout, err = cmd.StdoutPipe(); err != nil {
			return nil, err
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, stdin: stdin, done: make(chan struct{}), lines: make(chan string, 4)}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	if !printsAddr {
		return p, nil
	}
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
			case p.lines <- strings.TrimSpace(s):
			default: // nobody asked: dropped
			}
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	select {
	case p.addr = <-line:
		if p.addr != "" {
			return p, nil
		}
		<-p.done
		return nil, fmt.Errorf("%s exited before printing its address: %v", name, p.err)
	case <-ctx.Done():
		p.stop()
		return nil, fmt.Errorf("%s did not print its address: %w", name, ctx.Err())
	}
}

// query writes q on the process's stdin and waits for its one-line
// answer, which must be "ok".
func (p *proc) query(ctx context.Context, q string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := io.WriteString(p.stdin, q+"\n"); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	select {
	case l := <-p.lines:
		if l != "ok" {
			return fmt.Errorf("%s answered %q to %q", p.name, l, q)
		}
		return nil
	case <-p.done:
		return fmt.Errorf("%s exited: %v", p.name, p.err)
	case <-ctx.Done():
		return fmt.Errorf("%s: no answer to %q: %w", p.name, q, ctx.Err())
	}
}

// pid returns the process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop asks the process to stop (stdin closed, then SIGTERM) and kills it
// if it has not exited within 10 s.
func (p *proc) stop() error {
	p.stdin.Close()
	p.cmd.Process.Signal(os.Interrupt)
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop in 10s; killed", p.name)
	}
	var ee *exec.ExitError
	if p.err != nil && !(errors.As(p.err, &ee) && ee.Exited() && ee.ExitCode() == 0) && !isSignal(p.err) {
		return fmt.Errorf("%s: %w", p.name, p.err)
	}
	return nil
}

// isSignal reports whether err is an exit by the signal stop sent.
func isSignal(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && !ee.Exited()
}

// Usage is what /proc says of a process: resident memory now and at its
// peak, and CPU time used.
type Usage struct {
	RSS, HWM int64         // bytes: VmRSS and VmHWM of /proc/PID/status
	CPU      time.Duration // utime + stime of /proc/PID/stat
}

// clockTick is the unit of /proc/PID/stat's times (USER_HZ, 100 on every
// Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// readUsage reads pid's Usage.
func readUsage(pid int) (Usage, error) {
	var u Usage
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return u, err
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		switch k {
		case "VmRSS":
			u.RSS = kib(v)
		case "VmHWM":
			u.HWM = kib(v)
		}
	}
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return u, err
	}
	cpu, err := statCPU(string(st))
	if err != nil {
		return u, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	u.CPU = cpu
	return u, nil
}

// statCPU returns utime + stime of a /proc/PID/stat line. The command
// name (field 2) is in parentheses and may hold spaces, so the fields are
// counted from its closing parenthesis: utime and stime are fields 14 and
// 15.
func statCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no command name")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime is f[11], stime f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want 13 or more", len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	stt, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+stt) * clockTick, nil
}

// kib parses " 1234 kB" into bytes (0 when it cannot).
func kib(v string) int64 {
	v = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0
	}
	return n << 10
}

// monitor samples the usage of a set of processes (a contender may be
// more than one) every interval, for the CPU percentages of a scenario.
type monitor struct {
	pids     []int
	interval time.Duration

	mu      sync.Mutex
	start   Usage // summed over pids, at the start
	last    Usage
	lastAt  time.Time
	startAt time.Time
	maxRSS  int64
	maxCPU  float64 // % of one core, the busiest interval
	sumRSS  int64   // over the samples, for the average
	samples int64
	err     error
	stop    chan struct{}
	stopped chan struct{}
}

func sumUsage(pids []int) (Usage, error) {
	var s Usage
	for _, p := range pids {
		u, err := readUsage(p)
		if err != nil {
			return s, err
		}
		s.RSS += u.RSS
		s.HWM += u.HWM
		s.CPU += u.CPU
	}
	return s, nil
}

// startMonitor reads the processes' usage now and then every interval
// until [monitor.finish].
func startMonitor(pids []int, interval time.Duration) (*monitor, error) {
	u, err := sumUsage(pids)
	if err != nil {
		return nil, err
	}
	m := &monitor{pids: pids, interval: interval, start: u, last: u, lastAt: time.Now(), maxRSS: u.RSS,
		stop: make(chan struct{}), stopped: make(chan struct{})}
	m.startAt = m.lastAt
	go m.loop()
	return m, nil
}

func (m *monitor) loop() {
	defer close(m.stopped)
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.sample()
		}
	}
}

func (m *monitor) sample() {
	u, err := sumUsage(m.pids)
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		if m.err == nil {
			m.err = err
		}
		return
	}
	if dt := now.Sub(m.lastAt); dt > 0 {
		m.maxCPU = max(m.maxCPU, 100*float64(u.CPU-m.last.CPU)/float64(dt))
	}
	m.maxRSS = max(m.maxRSS, u.RSS, u.HWM)
	m.sumRSS += u.RSS
	m.samples++
	m.last, m.lastAt = u, now
}

// rssNow reads the processes' resident memory now.
func (m *monitor) rssNow() int64 {
	u, err := sumUsage(m.pids)
	if err != nil {
		return 0
	}
	return u.RSS
}

// Resources is what a monitor saw over a scenario.
type Resources struct {
	StartRSS int64   // bytes, summed over the contender's processes, before the load
	MaxRSS   int64   // the peak: the largest VmHWM or sampled VmRSS
	EndRSS   int64   // at the end of the load
	AvgRSS   int64   // the mean of the samples
	AvgCPU   float64 // % of one core over the scenario
	MaxCPU   float64 // % of one core, the busiest sampling interval
}

// finish stops sampling and returns what the monitor saw.
func (m *monitor) finish() (Resources, error) {
	close(m.stop)
	<-m.stopped
	m.sample()
	m.mu.Lock()
	defer m.mu.Unlock()
	r := Resources{StartRSS: m.start.RSS, MaxRSS: m.maxRSS, EndRSS: m.last.RSS, MaxCPU: m.maxCPU}
	if m.samples > 0 {
		r.AvgRSS = m.sumRSS / m.samples
	}
	if dt := m.lastAt.Sub(m.startAt); dt > 0 {
		r.AvgCPU = 100 * float64(m.last.CPU-m.start.CPU) / float64(dt)
	}
	return r, m.err
}
