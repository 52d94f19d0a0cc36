// Package need states what a test needs of the machine it runs on. Where
// the machine lacks it, [Skipf] skips the test with a message saying what
// is missing, so that `go test ./...` passes on a machine with only Go;
// with WIZARD_REQUIRE=1 in the environment (.ci/run sets it) the lack is a
// failure instead, so that CI never skips such a test silently.
package need

import (
	"fmt"
	"os"
	"testing"
)

// Env is the environment variable that turns skips into failures.
const Env = "WIZARD_REQUIRE"

// Required reports whether the tests' requirements must be met.
func Required() bool { return os.Getenv(Env) == "1" }

// Skipf skips t for lack of what format says, or fails it when
// [Required].
func Skipf(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("%s (required: %s=1)", msg, Env)
	}
	t.Skip(msg)
}
