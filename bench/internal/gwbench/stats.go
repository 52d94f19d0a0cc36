package gwbench

import (
	"math"
	"slices"
	"time"

	"github.com/wizardmesh/wizard/bench/internal/benchkit"
)

// Stats summarises the latencies of the calls that succeeded.
type Stats struct {
	Calls              int // succeeded
	Errors             int // failed, or answered wrongly
	FirstErr           string
	Window             time.Duration // the time the calls were counted in
	PerSec             float64       // Calls / Window
	Min, Max, Mean, SD time.Duration
	P50, P75, P95, P99 time.Duration
}

// summarise computes Stats of lat (sorted in place) over window.
func summarise(lat []time.Duration, errs int, firstErr string, window time.Duration) Stats {
	slices.Sort(lat)
	s := Stats{Calls: len(lat), Errors: errs, FirstErr: firstErr, Window: window}
	if window > 0 {
		s.PerSec = float64(len(lat)) / window.Seconds()
	}
	if len(lat) == 0 {
		return s
	}
	s.Min, s.Max = lat[0], lat[len(lat)-1]
	var sum float64
	for _, d := range lat {
		sum += float64(d)
	}
	mean := sum / float64(len(lat))
	var sq float64
	for _, d := range lat {
		sq += (float64(d) - mean) * (float64(d) - mean)
	}
	s.Mean = time.Duration(mean)
	s.SD = time.Duration(math.Sqrt(sq / float64(len(lat))))
	s.P50 = benchkit.Percentile(lat, 0.50)
	s.P75 = benchkit.Percentile(lat, 0.75)
	s.P95 = benchkit.Percentile(lat, 0.95)
	s.P99 = benchkit.Percentile(lat, 0.99)
	return s
}
