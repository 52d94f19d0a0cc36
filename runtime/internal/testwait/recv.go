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
