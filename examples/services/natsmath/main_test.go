package main

import (
	"bytes"
	"regexp"
	"testing"
)

// TestEmbedded runs the one-liner: an embedded broker, the math server
// and the caller, which finds the service through NATS discovery and
// calls it through the broker.
func TestEmbedded(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), &out, []string{"-embedded"}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	want := regexp.MustCompile(`(?s)^natsmath: embedded broker at nats://127\.0\.0\.1:\d+
natsmath: serving \d+ patterns on nats wizard\.node\.\w+
sum\(1, 2, 3\.5\) = 6\.5
product\(2, 3, 7\) = 42
divide\(1, 0\) -> invalid_argument: .+
$`)
	if !want.MatchString(out.String()) {
		t.Errorf("output:\n%s\nwant it to match:\n%s", out.String(), want)
	}
}

// TestBadRole: an unknown role is named.
func TestBadRole(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), &out, []string{"-role", "boss"}); err == nil || err.Error() != `unknown -role "boss" (want server, caller or both)` {
		t.Errorf("run: %v", err)
	}
}
