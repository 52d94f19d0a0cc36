package harness

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/internal/testkit/need"
)

// TestDriveSlowCalls drives callers whose calls outlast the window, as a
// server's may on a loaded machine (gRPC-go measured 0 req/s in the smoke
// tests so): the run must measure the first call that ends after the
// warm-up, over the window it took, not 0 req/s.
func TestDriveSlowCalls(t *testing.T) {
	tests := []struct {
		name      string
		load      Load
		call      time.Duration
		wantCalls int
		wantWin   time.Duration
	}{
		{"one caller, calls of 3 windows", Load{Callers: 1, Warmup: 100 * time.Millisecond, Duration: 200 * time.Millisecond}, 600 * time.Millisecond, 1, 500 * time.Millisecond},
		{"eight callers, calls of 3 windows", Load{Callers: 8, Warmup: 100 * time.Millisecond, Duration: 200 * time.Millisecond}, 600 * time.Millisecond, 1, 500 * time.Millisecond},
		{"fast calls, the window as asked", Load{Callers: 1, Warmup: 100 * time.Millisecond, Duration: 200 * time.Millisecond}, 30 * time.Millisecond, 6, 200 * time.Millisecond},
		{"stopped by MaxCalls", Load{Callers: 1, Duration: 200 * time.Millisecond, MaxCalls: 3}, 30 * time.Millisecond, 3, 90 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, err := drive(t.Context(), sleepClient{tt.call}, tt.load)
				if err != nil {
					t.Fatal(err)
				}
				if s.Calls != tt.wantCalls || s.Window != tt.wantWin || s.PerSec <= 0 || s.P50 != tt.call || s.Errors != 0 {
					t.Errorf("%d calls in %v, %.1f req/s, p50 %v, %d errors (%v); want %d calls in %v, p50 %v", s.Calls, s.Window, s.PerSec, s.P50, s.Errors, s.FirstErr, tt.wantCalls, tt.wantWin, tt.call)
				}
			})
		})
	}
}

// failClient's calls fail after d.
type failClient struct{ d time.Duration }

func (f failClient) Call(ctx context.Context, _, _ float64) (float64, error) {
	if _, err := (sleepClient{f.d}).Call(ctx, 0, 0); err != nil {
		return 0, err
	}
	return 0, errors.New("refused")
}

func (failClient) Close() error { return nil }

// TestDriveFailingCalls checks that a run whose calls all fail still ends
// at its window, with the errors counted, rather than waiting for a
// success.
func TestDriveFailingCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		s, err := drive(t.Context(), failClient{10 * time.Millisecond}, Load{Callers: 1, Warmup: 100 * time.Millisecond, Duration: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if s.Calls != 0 || s.Errors != 30 || s.FirstErr == nil || s.FirstErr.Error() != "refused" || time.Since(start) != 300*time.Millisecond {
			t.Errorf("%d calls, %d errors (first %v), %v; want 0, 30, refused, 300ms", s.Calls, s.Errors, s.FirstErr, time.Since(start))
		}
	})
}

// TestNodeDriveSlowCalls runs nodeload/drive.mjs, the Node.js clients'
// load loop, with calls that outlast its window: like drive, it must
// measure the first call that ends after the warm-up, not 0 req/s.
func TestNodeDriveSlowCalls(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		need.Skipf(t, "no node on PATH: %v", err)
	}
	dir, err := nodeDir("nodeload")
	if err != nil {
		t.Fatal(err)
	}
	script := `import { drive } from ` + strconv.Quote("file://"+filepath.Join(dir, "drive.mjs")) + `;
const call = (a, b) => new Promise((resolve) => setTimeout(() => resolve({ r: a + b }), 300));
await drive(call, 2, 20, 50, 0);
`
	cmd := exec.CommandContext(t.Context(), "node", "--input-type=module", "-e", script)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	s, err := parseNodeSample("drive.mjs", bytes.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}
	if s.Calls != 1 || s.PerSec <= 0 || s.P50 < 290*time.Millisecond || s.Window < 200*time.Millisecond || s.Errors != 0 {
		t.Errorf("%d calls in %v, %.1f req/s, p50 %v, %d errors; want 1 call of about 300ms in a window of 200ms or more", s.Calls, s.Window, s.PerSec, s.P50, s.Errors)
	}
}
