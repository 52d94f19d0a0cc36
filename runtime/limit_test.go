package runtime

import (
	"context"
	"fmt"
	"math"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/testlog"
)

// TestAddOverLimits: a listening node warns when it adds a handler whose
// pattern other nodes could not call; a node that does not listen, and a
// pattern within the limits, say nothing.
func TestAddOverLimits(t *testing.T) {
	keys := make([]string, defaultMaxPatternKeys+1)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d:1", i)
	}
	h := func(context.Context, Request) (any, error) { return nil, nil }
	for _, tt := range []struct {
		name    string
		listen  bool
		pattern string
		warns   bool
	}{
		{"too many keys", true, strings.Join(keys, ","), true},
		{"too long", true, "role:x,pad:" + strings.Repeat("p", defaultMaxPatternBytes), true},
		{"within the limits", true, strings.Join(keys[1:], ","), false},
		{"not listening", false, strings.Join(keys, ","), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs testlog.Buffer
			opts := []Option{WithTransport(newMemNet()), WithLogger(logs.Logger())}
			if tt.listen {
				opts = append(opts, WithListen("n"))
			}
			n, err := New(opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n.Close() })
			if err := n.Add(tt.pattern, h); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(logs.String(), "WithMaxPatternSize"); got != tt.warns {
				t.Errorf("warned %v, want %v; the log:\n%.500s", got, tt.warns, logs.String())
			}
		})
	}
}

// TestDefaultMaxInFlight: 2,048 handlers for each of GOMAXPROCS, within a
// quarter of the Go memory limit at 64 KiB each, and never under 256.
func TestDefaultMaxInFlight(t *testing.T) {
	old := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(old)
	if got, want := defaultMaxInFlight(), 2048*goruntime.GOMAXPROCS(0); got != want {
		t.Errorf("without a memory limit: %d, want %d", got, want)
	}
	debug.SetMemoryLimit(256 << 20)
	if got := defaultMaxInFlight(); got != min(1024, 2048*goruntime.GOMAXPROCS(0)) {
		t.Errorf("under 256 MiB: %d, want 1024", got)
	}
	debug.SetMemoryLimit(1 << 20)
	if got := defaultMaxInFlight(); got != 256 {
		t.Errorf("under 1 MiB: %d, want the floor of 256", got)
	}
}
