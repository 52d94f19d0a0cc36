package runtime

import (
	"context"
	"errors"
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
	matched, parsed := eventhook.Match([]eventhook.Sub{s}, canonical)
	if len(matched) != 1 || matched[0] != s || parsed == nil {
		t.Errorf("Match(%q) = %v, %v; want the subscription and the pattern parsed", canonical, matched, parsed)
	}
	if matched, _ := eventhook.Match([]eventhook.Sub{s}, "role:user"); matched != nil {
		t.Errorf("Match(role:user) = %v; want none", matched)
	}
	if matched, parsed := eventhook.Match([]eventhook.Sub{s}, "role:"); matched != nil || parsed != nil {
		t.Errorf("Match of a pattern that does not parse = %v, %v; want nil, nil", matched, parsed)
	}
	// The event as Match parsed it runs as one Run parses.
	ev := &eventhook.Event{Pattern: canonical, Group: "billing", Codec: codec, Payload: payload, Meta: meta, Source: "test:orders", Seq: 42, Parsed: parsed}
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

// TestEngineEventFailedRunsAgain: a failed event is not kept, so its copy
// runs again; a refused one says so (ErrRefused).
func TestEngineEventFailedRunsAgain(t *testing.T) {
	n, err := New(WithTransport(newMemNet()), WithListen("engine-fail"))
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	s, err := eventhook.NewSub(n, "role:order", "billing", Handler(func(ctx context.Context, req Request) (any, error) {
		if runs.Add(1) == 1 {
			return nil, Errorf(CodeUnavailable, "the ledger is down")
		}
		return nil, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	canonical, codec, payload, meta, err := eventhook.Encode(t.Context(), n, "role:order", nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := &eventhook.Event{Pattern: canonical, Group: "billing", Codec: codec, Payload: payload, Meta: meta, Source: "test:fail", Seq: 1}
	if err := eventhook.Run(t.Context(), n, []eventhook.Sub{s}, ev); CodeOf(err) != CodeUnavailable || errors.Is(err, eventhook.ErrRefused) {
		t.Fatalf("first run: %v; want the handler's unavailable, not a refusal", err)
	}
	if err := eventhook.Run(t.Context(), n, []eventhook.Sub{s}, ev); err != nil || runs.Load() != 2 {
		t.Fatalf("second run: %v after %d runs; want it run again and succeed", err, runs.Load())
	}
	if err := eventhook.Run(t.Context(), n, []eventhook.Sub{s}, ev); err != nil || runs.Load() != 2 {
		t.Fatalf("third run: %v after %d runs; want the kept success, not a run", err, runs.Load())
	}
	n.Close()
	ev.Seq = 2
	if err := eventhook.Run(t.Context(), n, []eventhook.Sub{s}, ev); !errors.Is(err, eventhook.ErrRefused) || runs.Load() != 2 {
		t.Errorf("on a closed node: %v; want ErrRefused, not run", err)
	}
}
