package testwait

import (
	"testing"
	"time"
)

// Guard bounds every wait in the tests: on a loaded machine things are
// slow, but nothing should take this long.
const Guard = 30 * time.Second

// Recv receives from ch, failing the test after the [Guard].
func Recv[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(Guard)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %v waiting on a %T channel", Guard, *new(T))
		panic("unreachable")
	}
}

// Until polls cond every few milliseconds until it holds, for conditions
// no event announces; it fails the test, saying what it waited for, after
// the [Guard].
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, Guard, what, cond)
}

// Within is [Until] with its own bound d, for waits whose length the test
// asserts; it returns how long cond took to hold.
func Within(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	if !Poll(d, cond) {
		t.Fatalf("after %v: %s", d, what)
	}
	return time.Since(start)
}

// Poll is the loop of [Within] without the failure: it polls cond every
// few milliseconds until it holds or d has passed, and reports whether it
// held, for callers that say themselves what went wrong (a leak check
// with its goroutine dump).
func Poll(d time.Duration, cond func() bool) bool {
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			return false
		}
		time.Sleep(2 * time.Millisecond) // a polling interval, not synchronisation
	}
	return true
}
