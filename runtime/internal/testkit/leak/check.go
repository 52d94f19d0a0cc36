package leak

import (
	"runtime"
	"testing"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

// Check fails t when, at cleanup, more goroutines run than when Check was
// called. Register it first so that it runs after the other cleanups.
func Check(t testing.TB) {
	t.Helper()
	t.Cleanup(Mark(t))
}

// Mark records the number of goroutines running now and returns a
// function that fails t if more are running when it is called. Goroutines
// that have finished their work take a moment to exit, so the function
// polls, bounded by [testwait.Guard], and reports a full goroutine dump.
func Mark(t testing.TB) (verify func()) {
	t.Helper()
	before := runtime.NumGoroutine()
	return func() {
		t.Helper()
		if !testwait.Poll(testwait.Guard, func() bool { return runtime.NumGoroutine() <= before }) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("goroutine leak: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf)
		}
	}
}
