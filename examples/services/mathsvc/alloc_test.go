//go:build !race

package mathsvc_test

import (
	"context"
	"testing"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
)

// TestGeneratedClientAllocs: a generated client call allocates nothing
// beyond what the handler allocates: nothing with a reused response, the
// response message with the example service. (Skipped under -race, which
// changes allocation counts.)
func TestGeneratedClientAllocs(t *testing.T) {
	want := map[string]float64{"reused-response": 0, "new-response": 1}
	for _, h := range handlers {
		t.Run(h.name, func(t *testing.T) {
			math := newMathClient(t, newBenchNode(t, h.new()))
			ctx := context.Background()
			req := &mathv1.SumRequest{Values: []float64{1, 2}}
			got := testing.AllocsPerRun(100, func() {
				if res, err := math.Sum(ctx, req); err != nil || res.GetSum() != 3 {
					t.Fatal(res, err)
				}
			})
			if got != want[h.name] {
				t.Errorf("%v allocations per call, want %v", got, want[h.name])
			}
		})
	}
}
