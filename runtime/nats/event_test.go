package nats_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/natstest"
)

// TestEmitOverNATS: events reach one member of each group through the
// broker, as over TCP.
func TestEmitOverNATS(t *testing.T) {
	b := natstest.Start(t)
	var runs [2]atomic.Int64
	for i, g := range []string{"billing", "shipping"} {
		for range 2 {
			n := meshNode(t, b.URL())
			if err := n.Subscribe("role:order", g, func(ctx context.Context, req runtime.Request) (any, error) {
				runs[i].Add(1)
				return nil, nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	e := meshNode(t, b.URL(), runtime.WithListen(""))
	if err := e.WaitForSubscribers(t.Context(), "role:order", "billing", "shipping"); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		d, err := e.Emit(t.Context(), "role:order,event:placed", map[string]any{"id": 1})
		if err != nil || !slices.Equal(slices.Sorted(slices.Values(d.Took)), []string{"billing", "shipping"}) {
			t.Fatalf("Emit = %+v, %v", d, err)
		}
	}
	if runs[0].Load() != 20 || runs[1].Load() != 20 {
		t.Errorf("runs: billing %d, shipping %d; want 20 each", runs[0].Load(), runs[1].Load())
	}
}
