package benchkit

import (
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type end struct {
		ms        int
		ok, count bool
	}
	tests := []struct {
		name   string
		ends   []end
		openAt int // Open at this time after the ends
		open   bool
		endMs  int
	}{
		{"calls in the window", []end{{50, true, false}, {150, true, true}, {250, true, false}}, 250, false, 200},
		{"none yet, past To", nil, 300, true, 200},
		{"the first call ends past To", []end{{50, true, false}, {350, true, true}, {360, true, false}}, 360, false, 350},
		{"a failure past To closes it", []end{{350, false, false}, {360, true, false}}, 360, false, 350},
		{"a failure in the window", []end{{150, false, false}, {250, true, false}}, 250, false, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWindow(at(100), at(200))
			for _, e := range tt.ends {
				if got := w.Ended(at(e.ms), e.ok); got != e.count {
					t.Errorf("Ended(%d ms, %v) = %v, want %v", e.ms, e.ok, got, e.count)
				}
			}
			if got := w.Open(at(tt.openAt)); got != tt.open {
				t.Errorf("Open(%d ms) = %v, want %v", tt.openAt, got, tt.open)
			}
			if got := w.End(); !got.Equal(at(tt.endMs)) {
				t.Errorf("End() = %v after t0, want %d ms", got.Sub(t0), tt.endMs)
			}
		})
	}
}

// TestWindowEndedAllocs: once a call has ended in the window, recording
// another allocates nothing (the load loops call Ended once a call, and
// an allocation there is timed with every call).
func TestWindowEndedAllocs(t *testing.T) {
	t0 := time.Now()
	w := NewWindow(t0, t0.Add(time.Hour))
	w.Ended(t0.Add(time.Millisecond), true)
	e := t0.Add(2 * time.Millisecond)
	if n := testing.AllocsPerRun(100, func() { w.Ended(e, true) }); n != 0 {
		t.Errorf("Ended allocates %v times a call, want 0", n)
	}
}
