package benchkit

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"p50 of 1..100", ms(hundred...), 0.50, 50 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"p50 of four", ms(1, 2, 3, 4), 0.50, 2 * time.Millisecond},
		{"p99 of four", ms(1, 2, 3, 4), 0.99, 4 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.sorted, tt.q); got != tt.want {
				t.Errorf("Percentile(%v) = %v, want %v", tt.q, got, tt.want)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want float64
	}{
		{"empty", nil, 0},
		{"odd", []float64{3, 1, 2}, 2},
		{"even", []float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Median(tt.in); got != tt.want {
				t.Errorf("Median(%v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

// TestParseStatCPU reads utime and stime from stat lines, command names
// with spaces and parentheses included, and refuses what is not a count of
// clock ticks.
func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"123 (compare) S 1 2 3 4 5 6 7 8 9 10 250 30 0 0 20 0 9", 280 * clockTick, true},
		{"1234 (wizard-gateway) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 100 0 0", 3 * time.Second, true},
		{"123 (a) b) (c) R 1 2 3 4 5 6 7 8 9 10 1 2 0", 3 * clockTick, true},
		{"9 (a (b) c) R 1 9 9 0 -1 0 0 0 0 0 7 3 0 0", 100 * time.Millisecond, true},
		{"123 compare S 1 2 3", 0, false},
		{"123 (x) S 1 2 3 4 5 6 7 8 9 10 -1 2 0", 0, false},
		{"123 (x) S 1 2 3 4 5 6 7 8 9 10 99999999999999999 2 0", 0, false},
		{"9 (x) R 1 9 9 0 -1 0 0 0 0 0 seven 3 0 0", 0, false},
		{"123 (x) S 1 2", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseStatCPU([]byte(tt.in))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseStatCPU(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// FuzzParseStatCPU checks that ParseStatCPU never panics nor returns a
// negative time.
func FuzzParseStatCPU(f *testing.F) {
	f.Add([]byte("1 (x) S 1 2 3 4 5 6 7 8 9 10 250 30 0"))
	f.Add([]byte("9 (a) b) R 1 9 9 0 -1 0 0 0 0 0 7 3"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if d, err := ParseStatCPU(b); err == nil && d < 0 {
			t.Fatalf("ParseStatCPU(%q) = %v", b, d)
		}
	})
}

// TestReadUsage reads this process's memory and CPU: resident memory is
// positive and never above its peak.
func TestReadUsage(t *testing.T) {
	u, err := ReadUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS <= 0 || u.HWM < u.RSS || u.CPU < 0 {
		t.Errorf("usage %+v", u)
	}
	if kib(" 2048 kB") != 2<<20 || kib("x kB") != 0 {
		t.Errorf("kib: %d, %d", kib(" 2048 kB"), kib("x kB"))
	}
}

// TestProc runs a shell that prints an address, answers a query and stops
// when its stdin closes.
func TestProc(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("needs sh")
	}
	cmd := exec.Command("sh", "-c", `echo 127.0.0.1:1; while read q; do echo "got $q"; done`)
	p, err := Start(t.Context(), "echoer", cmd, Options{Addr: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.Addr() != "127.0.0.1:1" {
		t.Errorf("Addr = %q", p.Addr())
	}
	if l, err := p.Ask(t.Context(), "x", 10*time.Second); err != nil || l != "got x" {
		t.Errorf("Ask = %q, %v", l, err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

// TestProcExitsWithoutAddr: a process that exits before its first line is
// an error naming it.
func TestProcExitsWithoutAddr(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("needs sh")
	}
	_, err := Start(context.Background(), "quitter", exec.Command("sh", "-c", "exit 3"), Options{Addr: true})
	if err == nil || !strings.Contains(err.Error(), "quitter exited before printing its address") {
		t.Errorf("Start = %v", err)
	}
}

func TestInts(t *testing.T) {
	if got, err := Ints("levels", "1, 16,,128"); err != nil || len(got) != 3 || got[2] != 128 {
		t.Errorf("Ints = %v, %v", got, err)
	}
	if _, err := Ints("levels", "1,x"); err == nil || err.Error() != `-levels: "x" is not a positive number` {
		t.Errorf("Ints(1,x) = %v", err)
	}
}
