package runtime_test

import (
	"io"
	"log"
	"os"
	"testing"
)

// TestMain keeps the test output clean: nodes that no test gives a logger
// log their warnings to slog.Default(), which writes through the log
// package. Tests that read those records set its output themselves.
func TestMain(m *testing.M) {
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}
