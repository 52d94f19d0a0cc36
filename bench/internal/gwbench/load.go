package gwbench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
)

// errCount counts failures and keeps the first.
type errCount struct {
	n     atomic.Int64
	first atomic.Pointer[string]
}

func (e *errCount) add(err error) {
	if e.n.Add(1) == 1 {
		s := err.Error()
		e.first.Store(&s)
	}
}

func (e *errCount) firstErr() string {
	if p := e.first.Load(); p != nil {
		return *p
	}
	return ""
}

// drive runs one closed loop per caller for warmup plus d and returns the
// Stats of the calls that completed in the d window after the warm-up
// (errors count anywhere in the run). The window stays open past d until
// a call ends in it (see [benchkit.Window]): a run on a loaded machine
// whose calls outlast d measures them rather than 0 req/s.
func drive(ctx context.Context, callers []caller, warmup, d time.Duration) (Stats, error) {
	if len(callers) == 0 || d <= 0 {
		return Stats{}, fmt.Errorf("gwbench: %d callers for %v: nothing to measure", len(callers), d)
	}
	start := time.Now()
	win := benchkit.NewWindow(start.Add(warmup), start.Add(warmup+d))
	const grace = 30 * time.Second
	ctx, cancel := context.WithDeadline(ctx, win.To.Add(grace))
	defer cancel()
	var errs errCount
	lat := make([][]time.Duration, len(callers))
	var wg sync.WaitGroup
	for w, c := range callers {
		wg.Go(func() {
			mine := make([]time.Duration, 0, 1024)
			for i := int64(0); ; i++ {
				s := time.Now()
				if !win.Open(s) || ctx.Err() != nil {
					break
				}
				err := c.call(ctx, int64(w)<<32|i)
				e := time.Now()
				if err != nil {
					errs.add(err)
				}
				if win.Ended(e, err == nil) {
					mine = append(mine, e.Sub(s))
				}
			}
			lat[w] = mine
		})
	}
	wg.Wait()
	if time.Since(win.To) >= grace {
		return Stats{}, fmt.Errorf("gwbench: run with %d callers stuck %v past its window", len(callers), grace)
	}
	var all []time.Duration
	for _, m := range lat {
		all = append(all, m...)
	}
	return summarise(all, int(errs.n.Load()), errs.firstErr(), win.End().Sub(win.From)), nil
}
