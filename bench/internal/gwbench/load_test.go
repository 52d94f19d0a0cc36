package gwbench

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// sleepCaller's calls take d each (in a synctest bubble, on its clock),
// and fail with err when it is set.
type sleepCaller struct {
	d   time.Duration
	err error
}

func (c sleepCaller) call(ctx context.Context, _ int64) error {
	t := time.NewTimer(c.d)
	defer t.Stop()
	select {
	case <-t.C:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (sleepCaller) close() {}

// TestDriveSlowCalls drives callers whose calls outlast the window, as a
// gateway's may on a loaded machine: the run must measure the first call
// that ends after the warm-up, over the window it took, not 0 req/s
// (which it did before the window waited for a call).
func TestDriveSlowCalls(t *testing.T) {
	tests := []struct {
		name      string
		callers   int
		call      time.Duration
		wantCalls int
		wantWin   time.Duration
	}{
		{"one caller, calls of 3 windows", 1, 600 * time.Millisecond, 1, 500 * time.Millisecond},
		{"four callers, calls of 3 windows", 4, 600 * time.Millisecond, 1, 500 * time.Millisecond},
		{"fast calls, the window as asked", 1, 30 * time.Millisecond, 6, 200 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cs := make([]caller, tt.callers)
				for i := range cs {
					cs[i] = sleepCaller{d: tt.call}
				}
				s, err := drive(t.Context(), cs, 100*time.Millisecond, 200*time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				if s.Calls != tt.wantCalls || s.Window != tt.wantWin || s.PerSec <= 0 || s.P50 != tt.call {
					t.Errorf("%d calls in %v, %.1f req/s, p50 %v; want %d calls in %v, p50 %v", s.Calls, s.Window, s.PerSec, s.P50, tt.wantCalls, tt.wantWin, tt.call)
				}
			})
		})
	}
}

// TestDriveFailingCalls checks that a run whose calls all fail still ends
// at its window, with the errors counted, rather than waiting for a
// success.
func TestDriveFailingCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		s, err := drive(t.Context(), []caller{sleepCaller{d: 10 * time.Millisecond, err: errors.New("refused")}}, 100*time.Millisecond, 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if s.Calls != 0 || s.Errors != 30 || s.FirstErr != "refused" || time.Since(start) != 300*time.Millisecond {
			t.Errorf("%d calls, %d errors (first %q), %v; want 0, 30, refused, 300ms", s.Calls, s.Errors, s.FirstErr, time.Since(start))
		}
	})
}
