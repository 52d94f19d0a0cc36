package swim_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

// TestSubscriptionsGossiped: a subscription made after a cluster formed
// reaches the other members through gossip and their catalog pulls; once
// removed, it runs no more.
func TestSubscriptionsGossiped(t *testing.T) {
	ms := startCluster(t, "ev", 3)
	waitRoutable(t, ms, ms[2].pattern())
	var ran atomic.Int64
	if err := ms[2].n.Subscribe("role:order", "billing", func(ctx context.Context, req runtime.Request) (any, error) {
		ran.Add(1)
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Guard)
	defer cancel()
	if err := ms[0].n.WaitForSubscribers(ctx, "role:order", "billing"); err != nil {
		t.Fatal(err)
	}
	d, err := ms[0].n.Emit(ctx, "role:order,event:placed", nil)
	if err != nil || len(d.Took) != 1 || ran.Load() != 1 {
		t.Fatalf("Emit = %+v, %v (ran %d); want billing to run it once", d, err, ran.Load())
	}
	if ok, err := ms[2].n.Unsubscribe("role:order", "billing"); !ok || err != nil {
		t.Fatalf("Unsubscribe = %v, %v", ok, err)
	}
	// Whether ms[0] has heard of the removal yet or not, the event is
	// not run and not lost in silence: the member refuses it (not_found)
	// or ms[0] finds no subscription.
	d, err = ms[0].n.Emit(ctx, "role:order,event:placed", nil)
	if runtime.CodeOf(err) != runtime.CodeNotFound || len(d.Took) != 0 || ran.Load() != 1 {
		t.Errorf("Emit after Unsubscribe = %+v, %v (ran %d); want not_found, not run", d, err, ran.Load())
	}
}
