package auth_test

import (
	"io"
	"log"
	"os"
	"testing"
)

// TestMain keeps the output clean: the warnings of failed JWKS refreshes,
// which some tests cause on purpose, go to slog.Default().
func TestMain(m *testing.M) {
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}
