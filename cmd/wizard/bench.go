package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wizardmesh/wizard/runtime"
)

// benchCommand is 'wizard bench', listed in [commands].
var benchCommand = &command{
	name: "bench",
	args: "PATTERN [DATA] | MESSAGE",
	summary: `Load-test a pattern from the shell: -c callers each make one call at a time,
in a loop (a closed loop), for -d after a warm-up; then the calls, req/s,
latency percentiles as the callers saw them (p50, p90, p99, max) and errors by
code. PATTERN and DATA are as act takes them. A progress line is printed on
the standard error when it is a terminal, none when it is piped. The exit
status is 1 when no call succeeded.`,
	example: `wizard bench --peers 127.0.0.1:7070 -c 16 -d 10s cmd:sum,role:math 'values:[1,2]'`,
	join:    true,
	flags:   addBenchFlags,
	run:     runBench,
}

type benchFlags struct {
	callFlags
	callers        int
	duration, warm time.Duration
}

func addBenchFlags(fs *flag.FlagSet) any {
	f := &benchFlags{}
	fs.IntVar(&f.callers, "c", 1, "callers, each making one call at a time")
	fs.DurationVar(&f.duration, "d", 10*time.Second, "how long to measure, after the warm-up (until the first call ends, if later)")
	fs.DurationVar(&f.warm, "warmup", 300*time.Millisecond, "how long to call before measuring")
	fs.StringVar(&f.mixin, "mixin", "", "comma-separated keys of DATA that route too")
	fs.Var(&f.metadata, "metadata", "call metadata key=value (repeatable)")
	return f
}

// benchJSON is a bench's result as --output json prints it.
type benchJSON struct {
	Pattern string  `json:"pattern"`
	Typed   string  `json:"typed,omitempty"`
	Callers int     `json:"callers"`
	Seconds float64 `json:"seconds"`
	Calls   int     `json:"calls"`
	RPS     float64 `json:"rps"`
	// The latencies of the calls that succeeded: absent when none did.
	P50MS  float64        `json:"p50_ms,omitempty"`
	P90MS  float64        `json:"p90_ms,omitempty"`
	P99MS  float64        `json:"p99_ms,omitempty"`
	MaxMS  float64        `json:"max_ms,omitempty"`
	Errors map[string]int `json:"errors"`
	// Messages holds, by code, the message of the first call that
	// failed with it.
	Messages map[string]string `json:"messages,omitempty"`
}

// benchWorker is one caller's record.
type benchWorker struct {
	lat  []time.Duration
	errs map[runtime.Code]int
	msgs map[runtime.Code]string // the first message of each code
}

func runBench(ctx context.Context, c *cli, args []string, own any) error {
	f := own.(*benchFlags)
	if err := wantArgs("bench", args, 1, 2, "PATTERN"); err != nil {
		return err
	}
	switch {
	case f.callers < 1:
		return usagef("-c %d: want at least one caller", f.callers)
	case f.duration <= 0:
		return usagef("-d %v: want a positive duration", f.duration)
	case f.warm < 0:
		return usagef("-warmup %v: cannot be negative", f.warm)
	}
	n, err := c.node(ctx)
	if err != nil {
		return err
	}
	cl, err := prepare(ctx, n, args, c.io.in, &f.callFlags)
	if err != nil {
		return err
	}
	// One call first: a pattern that fails at once fails the bench.
	first, cancel := context.WithTimeout(ctx, *c.mesh.timeout)
	_, err = cl.send(first, n)
	cancel()
	if err != nil && !isCallError(err) {
		return err
	}
	var measuring atomic.Bool
	var calls, failed atomic.Int64
	stop := make(chan struct{})
	ended := make(chan struct{}) // closed by the first call that ends while measuring
	var endedOnce sync.Once
	workers := make([]benchWorker, f.callers)
	var wg sync.WaitGroup
	for i := range workers {
		w := &workers[i]
		w.lat, w.errs, w.msgs = make([]time.Duration, 0, 4096), map[runtime.Code]int{}, map[runtime.Code]string{}
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Each call bounded by --timeout, as the node's default
				// timeout would bound it were ctx without a deadline.
				start := time.Now()
				callCtx, cancel := context.WithTimeout(ctx, *c.mesh.timeout)
				_, err := cl.send(callCtx, n)
				cancel()
				d := time.Since(start)
				if !measuring.Load() {
					continue
				}
				calls.Add(1)
				endedOnce.Do(func() { close(ended) })
				if err != nil {
					failed.Add(1)
					w.fail(err)
					continue
				}
				w.lat = append(w.lat, d)
			}
		})
	}
	done := progress(c.io.err, &calls, &failed, f.duration)
	timer := time.NewTimer(f.warm)
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	measuring.Store(true)
	began := time.Now()
	timer.Reset(f.duration)
	select {
	case <-timer.C:
		// Calls slower than the window: measure until one has ended in
		// it (the node's timeout bounds the wait), rather than report
		// no calls at all.
		select {
		case <-ended:
		case <-ctx.Done():
		}
	case <-ctx.Done(): // interrupted: report what was measured
	}
	measuring.Store(false)
	elapsed := time.Since(began)
	close(stop)
	wg.Wait()
	done()
	res := summarize(workers, elapsed)
	res.Pattern, res.Callers = cl.describe(), f.callers
	if cl.method != nil {
		res.Typed = string(cl.method.Input().FullName())
	}
	if c.json {
		c.printJSON(res)
	} else {
		writeBench(c.io.out, res)
	}
	if res.Calls > 0 && res.Calls == sum(res.Errors) {
		return errFailed
	}
	return nil
}

func (cl *call) describe() string {
	if cl.act {
		return fmt.Sprint(cl.msg)
	}
	return cl.pattern
}

func sum(m map[string]int) int {
	t := 0
	for _, v := range m {
		t += v
	}
	return t
}

// fail records a failed call.
func (w *benchWorker) fail(err error) {
	code := runtime.CodeOf(err)
	if w.errs[code]++; w.errs[code] == 1 {
		w.msgs[code] = strings.TrimPrefix(errorText(err), code.String()+": ")
	}
}

// summarize merges the workers' records.
func summarize(workers []benchWorker, elapsed time.Duration) benchJSON {
	var lat []time.Duration
	res := benchJSON{Seconds: elapsed.Seconds(), Errors: map[string]int{}}
	for _, w := range workers {
		lat = append(lat, w.lat...)
		for code, k := range w.errs {
			res.Errors[code.String()] += k
			if _, ok := res.Messages[code.String()]; !ok {
				if res.Messages == nil {
					res.Messages = map[string]string{}
				}
				res.Messages[code.String()] = w.msgs[code]
			}
		}
	}
	slices.Sort(lat)
	res.Calls = len(lat) + sum(res.Errors)
	res.RPS = float64(res.Calls) / elapsed.Seconds()
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	if len(lat) > 0 {
		at := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
		res.P50MS, res.P90MS, res.P99MS, res.MaxMS = ms(at(0.50)), ms(at(0.90)), ms(at(0.99)), ms(lat[len(lat)-1])
	}
	return res
}

func writeBench(w io.Writer, r benchJSON) {
	fmt.Fprintf(w, "pattern   %s", r.Pattern)
	if r.Typed != "" {
		fmt.Fprintf(w, "  (typed: %s)", r.Typed)
	}
	fmt.Fprintf(w, "\ncallers   %d, closed loop, %.1fs\n", r.Callers, r.Seconds)
	fmt.Fprintf(w, "calls     %d  (%.0f req/s)\n", r.Calls, r.RPS)
	if r.Calls > sum(r.Errors) {
		fmt.Fprintf(w, "latency   p50 %s  p90 %s  p99 %s  max %s\n", msText(r.P50MS), msText(r.P90MS), msText(r.P99MS), msText(r.MaxMS))
	} else {
		fmt.Fprintf(w, "latency   none: no call succeeded\n")
	}
	if len(r.Errors) == 0 {
		fmt.Fprintf(w, "errors    none\n")
		return
	}
	codes := make([]string, 0, len(r.Errors))
	for c := range r.Errors {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%s %d", c, r.Errors[c]))
	}
	fmt.Fprintf(w, "errors    %s\n", strings.Join(parts, ", "))
	for _, c := range codes {
		fmt.Fprintf(w, "  first %s: %s\n", c, r.Messages[c])
	}
}

func msText(ms float64) string {
	return time.Duration(ms * float64(time.Millisecond)).Round(time.Microsecond).String()
}

// progress prints a progress line every second on w when it is a
// terminal; the function it returns stops it and clears the line.
func progress(w io.Writer, calls, failed *atomic.Int64, total time.Duration) func() {
	if !isTerminal(w) {
		return func() {}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		start, last := time.Now(), int64(0)
		for {
			select {
			case <-stop:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-tick.C:
				k := calls.Load()
				fmt.Fprintf(w, "\r\033[K%4.0fs / %v  %d calls  %d req/s  %d errors", time.Since(start).Seconds(), total, k, k-last, failed.Load())
				last = k
			}
		}
	}()
	return func() { close(stop); <-done }
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
