package microwizard_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/microwizard"
)

// floodResult is what mw-client.mjs's flood scenario answers.
type floodResult struct {
	Big struct {
		Err *struct{ Name, Message, Code string }
		Ms  float64
	}
	Ok     float64
	Failed []string
}

// TestOversizedLineFailsOneCall: a real MicroWizard client has 64 calls
// in flight on its connection when it sends a 5 MiB call, over a 4 MiB
// line bound: that call fails at once with a size error named
// RangeError, and the 64 calls (released by a call sent after it) are
// answered on the same connection.
func TestOversizedLineFailsOneCall(t *testing.T) {
	needNode(t, "microwizard")
	leak.Check(t)
	n := newNode(t, newTransport(t, microwizard.WithMaxLine(4<<20)))
	mustAdd(t, n, "role:go,cmd:size", sizeOf)
	released := make(chan struct{})
	var once sync.Once
	mustAdd(t, n, "role:go,cmd:release", func(ctx context.Context, req runtime.Request) (any, error) {
		once.Do(func() { close(released) })
		return map[string]any{}, nil
	})
	mustAdd(t, n, "role:go,cmd:hold", func(ctx context.Context, req runtime.Request) (any, error) {
		select {
		case <-released:
			return map[string]any{"held": true}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	_, port, _ := strings.Cut(n.Addr(), "127.0.0.1:")
	bigCallTimeout(t)
	p := startNode(t, "mw-client.mjs", port, "flood")
	var r struct {
		Res floodResult
		Err any
	}
	p.next(t, &r)
	big := r.Res.Big
	if big.Err == nil || big.Err.Name != "RangeError" || big.Err.Code != "resource_exhausted" || !strings.Contains(big.Err.Message, "line bound") {
		t.Errorf("the 5 MiB call: got %+v, want a RangeError resource_exhausted naming the line bound", big.Err)
	}
	if big.Ms >= 7500 {
		t.Errorf("the 5 MiB call failed after %v ms, half the client's timeout: want at once", big.Ms)
	}
	if r.Res.Ok != 65 {
		t.Errorf("%v of the 64 held calls and the release answered, want 65 (failed with %q; err %v)", r.Res.Ok, r.Res.Failed, r.Err)
	}
}

// TestDefaultLineBoundTakesFiveMiB: by default a 5 MiB act, which
// MicroWizard serves, reaches the Go handler.
func TestDefaultLineBoundTakesFiveMiB(t *testing.T) {
	needNode(t, "microwizard")
	leak.Check(t)
	n := newNode(t, newTransport(t))
	mustAdd(t, n, "role:go,cmd:size", sizeOf)
	bigCallTimeout(t)
	got := runClient(t, n, "warm", "big5")
	if r := got["big5"]; r.Err != nil || r.Res["len"] != float64(5<<20) {
		t.Errorf("act with a 5 MiB string: got %+v (err %+v), want len %d", r.Res, r.Err, 5<<20)
	}
}

// TestOversizedAnswerFailsOneCall: a real MicroWizard node answers one
// call with a line over the caller's bound while 32 other calls are on
// the connection: that call fails resource_exhausted, the others are
// answered, and the connection serves on.
func TestOversizedAnswerFailsOneCall(t *testing.T) {
	needNode(t, "microwizard")
	leak.Check(t)
	addr := startServer(t, "node")
	tr := newTransport(t, microwizard.WithPeer(addr, "role:math,cmd:sum", "role:test,cmd:grow"), microwizard.WithMaxLine(1<<20))
	n := callerNode(t, tr, "role:math,cmd:sum")
	ctx := t.Context()
	errs := make(chan error, 32)
	for range 32 {
		go func() {
			_, err := n.Act(ctx, "role:math,cmd:sum", map[string]any{"a": 1, "b": 2})
			errs <- err
		}()
	}
	_, err := n.Act(ctx, "role:test,cmd:grow", map[string]any{"n": 2 << 20})
	if runtime.CodeOf(err) != runtime.CodeResourceExhausted || !strings.Contains(err.Error(), "line bound") {
		t.Errorf("the call answered with 2 MiB: got %v, want resource_exhausted naming the line bound", err)
	}
	for range 32 {
		if err := <-errs; err != nil {
			t.Errorf("another call: %v", err)
		}
	}
	if _, err := n.Act(ctx, "role:math,cmd:sum", map[string]any{"a": 1, "b": 2}); err != nil {
		t.Errorf("after: %v", err)
	}
}
