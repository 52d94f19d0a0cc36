package runtime

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/wizardmesh/wizard/runtime/internal/eventhook"
)

// TestEngineEventOnce runs an engine's event twice under one key: the
// subscription runs once, and the copy gets the first run's outcome.
func TestEngineEventOnce(t *testing.T) {
	n, err := New(WithTransport(newMemNet()), WithListen("engine"), WithService("billing"))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	var runs atomic.Int64
	var got string
	s, err := eventhook.NewSub(n, "role:order", "", Handler(func(ctx context.Context, req Request) (any, error) {
		runs.Add(1)
		got, _ = req.String("id")
		if req.Group() != "billing" {
			t.Errorf("Group() = %q, want the node's service", req.Group())
		}
		return nil, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	canonical, codec, payload, meta, err := eventhook.Encode(t.Context(), n, "role:order,event:placed", map[string]any{"id": "7"})
	if err != nil {
		t.Fatal(err)
	}
	if canonical != "event:placed,id:7,role:order" {
		t.Errorf("Encode's pattern = %q", canonical)
	}
	if !eventhook.Matches(s, canonical) || eventhook.Matches(s, "role:user") {
		t.Error("Matches disagrees with the subscription's pattern")
	}
	ev := &eventhook.Event{Pattern: canonical, Group: "billing", Codec: codec, Payload: payload, Meta: meta, Source: "test:orders", Seq: 42}
	for range 2 {
		if err := eventhook.Run(t.Context(), n, []eventhook.Sub{s}, ev); err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	if runs.Load() != 1 || got != "7" {
		t.Errorf("the subscription ran %d times with id %q; want once with 7", runs.Load(), got)
	}
	ev.Seq = 43
	if err := eventhook.Run(t.Context(), n, []eventhook.Sub{s}, ev); err != nil || runs.Load() != 2 {
		t.Errorf("another event: %v, %d runs; want it run", err, runs.Load())
	}
}
