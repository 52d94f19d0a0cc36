package main

import (
	"os"
	"regexp"
	"testing"
)

// skipf skips t, or fails it when WIZARD_REQUIRE=1 (CI, where what the
// test needs is installed).
func skipf(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("WIZARD_REQUIRE") == "1" {
		t.Fatalf("WIZARD_REQUIRE=1: "+format, args...)
	}
	t.Skipf(format, args...)
}

// networkError matches what the go tool prints when it cannot reach a
// proxy or the checksum database.
var networkError = regexp.MustCompile(`dial tcp|no such host|network is unreachable|connection refused|i/o timeout|TLS handshake timeout`)
