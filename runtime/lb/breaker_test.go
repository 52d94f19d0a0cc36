package lb

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/failsafe-go/failsafe-go/circuitbreaker"
)

func newBreakers(t *testing.T, opts ...BreakerOption) *Breakers[string] {
	t.Helper()
	b, err := NewBreakers[string](opts...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fail runs n calls that fail, each with a permit.
func fail(t *testing.T, br *Breaker, n int) {
	t.Helper()
	for i := range n {
		if !br.Allow() {
			t.Fatalf("failure %d of %d: no permit", i+1, n)
		}
		br.Failure()
	}
}

func wantState(t *testing.T, br *Breaker, want circuitbreaker.State) {
	t.Helper()
	if got := br.State(); got != want {
		t.Fatalf("state %v, want %v", got, want)
	}
}

func TestBreakerOpensAfterFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t) // 5 failures in a row
		br := bs.Get("a")
		fail(t, br, 4)
		br.Allow()
		br.Success() // a success breaks the run
		fail(t, br, 4)
		wantState(t, br, circuitbreaker.ClosedState)
		fail(t, br, 1)
		wantState(t, br, circuitbreaker.OpenState)
		if br.Allow() {
			t.Error("open breaker granted a permit")
		}
		if !br.IsOpen() || !bs.IsOpen("a") || !bs.Skip("a") {
			t.Error("open breaker not reported open")
		}
		if bs.IsOpen("b") || bs.Skip("b") {
			t.Error("another target's breaker is open")
		}
	})
}

func TestBreakerFailureRatio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		br := newBreakers(t, WithFailureThreshold(3, 10)).Get("a")
		for range 8 {
			br.Allow()
			br.Success()
		}
		fail(t, br, 2) // 2 of the last 10
		wantState(t, br, circuitbreaker.ClosedState)
		for range 7 { // the two failures are still among the last 10
			br.Allow()
			br.Success()
		}
		fail(t, br, 1)
		wantState(t, br, circuitbreaker.OpenState)
	})
}

// TestBreakerFailureRate uses the time-based threshold: failures older
// than the period are forgotten.
func TestBreakerFailureRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		br := newBreakers(t, WithFailureRate(0.5, 4, time.Minute)).Get("a")
		fail(t, br, 3) // 3 calls: below the minimum
		wantState(t, br, circuitbreaker.ClosedState)
		time.Sleep(2 * time.Minute) // they expire
		br.Allow()
		br.Success()
		fail(t, br, 1)
		br.Allow()
		br.Success()
		br.Allow()
		br.Success()
		wantState(t, br, circuitbreaker.ClosedState) // 1 of 4
		fail(t, br, 2)
		wantState(t, br, circuitbreaker.OpenState) // 3 of 6
	})
}

func TestBreakerHalfOpenAfterDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, WithDelay(10*time.Second), WithJitter(0))
		br := bs.Get("a")
		fail(t, br, 5)
		time.Sleep(10*time.Second - time.Nanosecond)
		if br.Allow() || !br.IsOpen() {
			t.Fatal("breaker let a call through before its delay")
		}
		time.Sleep(time.Nanosecond)
		if br.IsOpen() {
			t.Error("IsOpen after the delay")
		}
		wantState(t, br, circuitbreaker.OpenState) // until someone asks
		if !br.Allow() {
			t.Fatal("no trial permit after the delay")
		}
		wantState(t, br, circuitbreaker.HalfOpenState)
		if br.Allow() {
			t.Error("a second trial while the first is running")
		}
		br.Success()
		wantState(t, br, circuitbreaker.ClosedState)
		if !br.Allow() || !br.Allow() {
			t.Error("closed breaker refused")
		}
	})
}

func TestBreakerTrialFailureReopens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		br := newBreakers(t, WithDelay(time.Second), WithJitter(0)).Get("a")
		fail(t, br, 5)
		time.Sleep(time.Second)
		fail(t, br, 1) // the trial
		wantState(t, br, circuitbreaker.OpenState)
		time.Sleep(time.Second - time.Nanosecond) // a new, full delay
		if br.Allow() {
			t.Fatal("reopened breaker let a call through before its new delay")
		}
		time.Sleep(time.Nanosecond)
		if !br.Allow() {
			t.Fatal("no trial after the new delay")
		}
	})
}

func TestBreakerSuccessThreshold(t *testing.T) {
	tests := []struct {
		name    string
		results string // of the trials, S or F
		want    circuitbreaker.State
	}{
		{"two of three close", "SFS", circuitbreaker.ClosedState},
		{"two in a row close early", "SS", circuitbreaker.ClosedState},
		{"two failures reopen", "FSF", circuitbreaker.OpenState},
		{"still trying", "FS", circuitbreaker.HalfOpenState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				br := newBreakers(t, WithDelay(time.Second), WithJitter(0), WithSuccessThreshold(2, 3)).Get("a")
				fail(t, br, 5)
				time.Sleep(time.Second)
				// Three trials may run at once.
				for i := range 3 {
					if !br.Allow() {
						t.Fatalf("trial %d refused", i+1)
					}
				}
				if br.Allow() {
					t.Fatal("a fourth trial")
				}
				for _, r := range tt.results {
					if r == 'S' {
						br.Success()
					} else {
						br.Failure()
					}
				}
				wantState(t, br, tt.want)
			})
		})
	}
}

// TestBreakerJitter checks each delay falls within the jitter and that
// breakers opened together do not all probe together.
func TestBreakerJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, WithDelay(10*time.Second), WithJitter(0.2))
		const n = 50
		for i := range n {
			bs.Get(fmt.Sprint(i)).Open()
		}
		allowed := func() int {
			c := 0
			for i := range n {
				if !bs.IsOpen(fmt.Sprint(i)) {
					c++
				}
			}
			return c
		}
		time.Sleep(8*time.Second - time.Nanosecond)
		if c := allowed(); c != 0 {
			t.Errorf("%d breakers past their delay before 8s", c)
		}
		time.Sleep(2 * time.Second)
		if c := allowed(); c == 0 || c == n {
			t.Errorf("%d of %d breakers past their delay at 10s, want some but not all", c, n)
		}
		time.Sleep(2 * time.Second)
		if c := allowed(); c != n {
			t.Errorf("%d of %d breakers past their delay at 12s", c, n)
		}
	})
}

func TestBreakerOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, WithDelay(time.Second), WithJitter(0))
		br := bs.Get("a")
		if !br.Allow() {
			t.Fatal("new breaker refused")
		}
		br.Open() // an overload answer
		if !bs.Skip("a") {
			t.Error("opened breaker let a call through")
		}
		time.Sleep(time.Second)
		if bs.Skip("a") {
			t.Error("no trial after the delay")
		}
		br.Open() // the trial was refused as well: a new delay
		if !bs.Skip("a") {
			t.Error("reopened breaker let a call through")
		}
	})
}

func TestBreakersLazyAndDrop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t)
		if bs.IsOpen("a") || bs.Len() != 0 {
			t.Fatal("IsOpen made a breaker")
		}
		br := bs.Get("a")
		if bs.Get("a") != br {
			t.Error("Get made a second breaker for the same target")
		}
		bs.Skip("b")
		if bs.Len() != 2 {
			t.Errorf("Len = %d, want 2", bs.Len())
		}
		br.Open()
		bs.Drop("a")
		bs.Drop("nobody")
		if bs.Len() != 1 || bs.IsOpen("a") {
			t.Error("Drop kept the breaker")
		}
		if bs.Get("a") == br || bs.Skip("a") {
			t.Error("the target's breaker after Drop is the old one")
		}
	})
}

// TestBreakersWithRing is the intended use: the ring skips open circuits,
// and a half-open target gets exactly one trial.
func TestBreakersWithRing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, WithDelay(time.Second), WithJitter(0))
		r := NewRing[string]()
		for _, n := range []string{"a", "b", "c"} {
			r.Add(n, 1)
		}
		call := func() string {
			t.Helper()
			tg, ok := r.Pick("", bs.Skip)
			if !ok {
				return "-"
			}
			bs.Get(tg).Success()
			return tg
		}
		bs.Get("b").Open()
		var got []string
		for range 4 {
			got = append(got, call())
		}
		if s := strings.Join(got, " "); s != "a c a c" {
			t.Errorf("picks with b open = %s, want a c a c", s)
		}
		bs.Get("a").Open()
		bs.Get("c").Open()
		if s := call(); s != "-" {
			t.Errorf("pick with every circuit open = %s", s)
		}
		time.Sleep(time.Second)
		// All three half-open: each gets one trial, and a caller that
		// has not answered yet keeps the others from a second.
		var trials []string
		for range 4 {
			tg, ok := r.Pick("", bs.Skip)
			if !ok {
				tg = "-"
			}
			trials = append(trials, tg)
		}
		if s := strings.Join(trials, " "); s != "a b c -" {
			t.Errorf("picks while half-open = %s, want a b c -", s)
		}
	})
}

func TestBreakerOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  BreakerOption
		err  string // empty for valid
	}{
		{"threshold", WithFailureThreshold(3, 10), ""},
		{"threshold zero", WithFailureThreshold(0, 10), "failure threshold 0 of 10"},
		{"threshold window too small", WithFailureThreshold(5, 4), "failure threshold 5 of 4"},
		{"rate", WithFailureRate(0.5, 10, time.Minute), ""},
		{"rate zero", WithFailureRate(0, 10, time.Minute), "failure rate 0"},
		{"rate above one", WithFailureRate(1.5, 10, time.Minute), "failure rate 1.5"},
		{"rate no period", WithFailureRate(0.5, 10, 0), "failure rate 0.5 over 10 calls in 0s"},
		{"delay", WithDelay(time.Second), ""},
		{"delay zero", WithDelay(0), "breaker delay 0s"},
		{"jitter off", WithJitter(0), ""},
		{"jitter one", WithJitter(1), "breaker jitter 1"},
		{"jitter negative", WithJitter(-0.1), "breaker jitter -0.1"},
		{"success", WithSuccessThreshold(2, 3), ""},
		{"success zero", WithSuccessThreshold(0, 3), "success threshold 0 of 3"},
		{"success too many", WithSuccessThreshold(4, 3), "success threshold 4 of 3"},
		{"escape", WithCircuitBreaker(func(circuitbreaker.Builder[any]) {}), ""},
		{"escape nil", WithCircuitBreaker(nil), "nil circuit breaker function"},
		{"nil option", nil, "option 1 of 1 is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewBreakers[string](tt.opt)
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("error %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !strings.HasPrefix(err.Error(), "wizard: lb: ")):
				t.Errorf("error %v, want one with %q", err, tt.err)
			}
		})
	}
}

func TestBreakerEscapeHatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var opened atomic.Int32
		bs := newBreakers(t, WithFailureThreshold(1, 1), WithCircuitBreaker(func(b circuitbreaker.Builder[any]) {
			b.OnOpen(func(circuitbreaker.StateChangedEvent) { opened.Add(1) })
		}))
		fail(t, bs.Get("a"), 1)
		fail(t, bs.Get("b"), 1)
		if got := opened.Load(); got != 2 {
			t.Errorf("OnOpen called %d times, want 2", got)
		}
	})
}

func TestBreakersConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bs := newBreakers(t, WithDelay(time.Millisecond))
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := range 2000 {
					k := fmt.Sprint(i % 7)
					if bs.Skip(k) {
						continue
					}
					if (i+g)%3 == 0 {
						bs.Get(k).Failure()
					} else {
						bs.Get(k).Success()
					}
					if i%500 == 0 {
						time.Sleep(time.Millisecond)
					}
				}
			})
		}
		wg.Go(func() {
			for i := range 500 {
				bs.Drop(fmt.Sprint(i % 7))
				bs.IsOpen(fmt.Sprint(i % 5))
				bs.Len()
			}
		})
		wg.Wait()
	})
}

func TestBreakerRoundTripAllocatesNothing(t *testing.T) {
	bs := newBreakers(t)
	br := bs.Get("a")
	allocs := testing.AllocsPerRun(1000, func() {
		if !bs.Skip("a") {
			br.Success()
		}
		if br.Allow() {
			br.Failure()
			br.Success()
		}
		bs.IsOpen("a")
	})
	if allocs != 0 {
		t.Errorf("%v allocations per round trip, want 0", allocs)
	}
}
