package harness

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
)

// Load is one measured run: callers goroutines call c in a loop over one
// client for Warmup plus Duration, and the calls that complete within the
// Duration window count. The window stays open past Duration until a call
// ends in it (see [benchkit.Window]): a run on a loaded machine whose
// calls outlast Duration measures them rather than 0 req/s.
type Load struct {
	Callers  int
	Warmup   time.Duration
	Duration time.Duration
	// MaxCalls bounds the calls of the run, whatever the time (0: no
	// bound beyond time).
	MaxCalls int64
	// Grace is how long after the window calls in flight may take before
	// the run is abandoned as stuck (default 10 s).
	Grace time.Duration
}

// latChunk is how many latencies a chunk of a caller's holds.
const latChunk = 1 << 16

// Sample is what one run measured.
type Sample struct {
	Calls    int           // completed in the window
	Errors   int           // failed or wrong answers, anywhere in the run
	FirstErr error         // the first of them
	Window   time.Duration // the window actually measured
	PerSec   float64
	P50, P99 time.Duration
}

// drive runs l against c and returns what it measured.
func drive(ctx context.Context, c Client, l Load) (Sample, error) {
	if l.Callers <= 0 || l.Duration <= 0 {
		return Sample{}, fmt.Errorf("harness: %d callers for %v: nothing to measure", l.Callers, l.Duration)
	}
	grace := l.Grace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	start := time.Now()
	win := benchkit.NewWindow(start.Add(l.Warmup), start.Add(l.Warmup+l.Duration))
	ctx, cancel := context.WithDeadline(ctx, win.To.Add(grace))
	defer cancel()
	// now reads the monotonic clock alone, as the Node.js loops'
	// process.hrtime does: time.Now reads the wall clock too, which costs
	// as much again, twice a call, in the timing of every Go row.
	now := func() time.Time { return start.Add(time.Since(start)) }

	var (
		calls    atomic.Int64
		errs     atomic.Int64
		firstErr atomic.Pointer[error]
		stopped  atomic.Bool // by MaxCalls
		wg       sync.WaitGroup
	)
	// Each caller keeps its latencies in chunks of latChunk, appended
	// without copying what came before: one growing slice moves its
	// contents at every growth (millions of entries at in-process rates),
	// a copy timed with the call that grows it.
	lat := make([][][]time.Duration, l.Callers)
	for w := range l.Callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine [][]time.Duration
			cur := make([]time.Duration, 0, 1024)
			a := float64(w)
			for i := 0; ; i++ {
				s := now()
				if !win.Open(s) || stopped.Load() || ctx.Err() != nil {
					break
				}
				if l.MaxCalls > 0 && calls.Add(1) > l.MaxCalls {
					stopped.Store(true)
					break
				}
				b := float64(i)
				r, err := c.Call(ctx, a, b)
				e := now()
				if err == nil && r != a+b {
					err = fmt.Errorf("%v + %v answered %v", a, b, r)
				}
				if err != nil && errs.Add(1) == 1 {
					first := err // a copy: &err would move err to the heap on every call
					firstErr.Store(&first)
				}
				if win.Ended(e, err == nil) {
					if len(cur) == cap(cur) {
						mine = append(mine, cur)
						cur = make([]time.Duration, 0, latChunk)
					}
					cur = append(cur, e.Sub(s))
				}
			}
			lat[w] = append(mine, cur)
		}()
	}
	wg.Wait()
	end := win.End()
	if now := time.Now(); now.Before(end) { // stopped by MaxCalls
		end = now
	}
	if time.Since(win.To) >= grace {
		return Sample{}, fmt.Errorf("harness: run with %d callers stuck %v past its window", l.Callers, grace)
	}
	var all []time.Duration
	for _, m := range lat {
		for _, c := range m {
			all = append(all, c...)
		}
	}
	slices.Sort(all)
	s := Sample{Calls: len(all), Errors: int(errs.Load()), Window: end.Sub(win.From)}
	if p := firstErr.Load(); p != nil {
		s.FirstErr = *p
	}
	if s.Window > 0 {
		s.PerSec = float64(s.Calls) / s.Window.Seconds()
	}
	s.P50 = benchkit.Percentile(all, 0.50)
	s.P99 = benchkit.Percentile(all, 0.99)
	return s, nil
}
