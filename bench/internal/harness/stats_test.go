package harness

import (
	"math"
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
			if got := percentile(tt.sorted, tt.q); got != tt.want {
				t.Errorf("percentile(%v) = %v, want %v", tt.q, got, tt.want)
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
			if got := median(tt.in); got != tt.want {
				t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestSpread(t *testing.T) {
	tests := []struct {
		name   string
		served []uint64
		want   float64
	}{
		{"none", nil, 0},
		{"no calls", []uint64{0, 0, 0}, 0},
		{"even", []uint64{100, 100, 100}, 0},
		{"one off", []uint64{101, 100, 99}, 0.02},
		{"all on one", []uint64{300, 0, 0}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (ClusterRow{Served: tt.served}).Spread(); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("Spread(%v) = %v, want %v", tt.served, got, tt.want)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	tests := []struct{ got, want string }{
		{rate(0), "0"},
		{rate(999.6), "1,000"},
		{rate(1234567), "1,234,567"},
		{dur(38200 * time.Nanosecond), "38.2 µs"},
		{dur(12345 * time.Microsecond), "12.35 ms"},
		{dur(-500 * time.Microsecond), "-500.0 µs"},
		{dur(1500 * time.Millisecond), "1.50 s"},
		{shortRate(1000), "1k"},
		{shortRate(2000), "2k"},
		{shortRate(65293), "65.3k"},
		{shortRate(220890), "221k"},
		{shortRate(1.5e6), "1.5M"},
		{shortRate(50), "50"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
