package harness

import (
	"math"
	"testing"
	"time"
)

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
