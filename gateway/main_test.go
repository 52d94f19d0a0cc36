package gateway

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestMain fails the run when goroutines outlive the tests: every
// gateway, connection and node a test starts is closed by its cleanups
// (as runtime/internal/testkit/leak checks, which this package cannot
// import).
func TestMain(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	http.DefaultClient.CloseIdleConnections()
	if code == 0 && !fuzzing() {
		start := time.Now()
		for runtime.NumGoroutine() > before {
			if time.Since(start) > guard {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				fmt.Fprintf(os.Stderr, "goroutine leak: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf)
				code = 1
				break
			}
			time.Sleep(5 * time.Millisecond) // a polling interval, not synchronisation
		}
	}
	os.Exit(code)
}

// fuzzing reports whether the run fuzzes: the fuzzing engine's own
// goroutines outlive m.Run.
func fuzzing() bool {
	for _, name := range []string{"test.fuzz", "test.fuzzworker"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" && f.Value.String() != "false" {
			return true
		}
	}
	return false
}
