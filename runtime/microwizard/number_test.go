package microwizard_test

import (
	"context"
	"errors"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/microwizard"
)

// unsafeID is an integer a JavaScript number cannot hold: Node.js would
// read it as 9007199254740992.
const unsafeID = int64(1<<53 + 1)

// TestNumbersServedAsJavaScriptRoutes: a real MicroWizard client's act
// {v: 1e21} routes by "1e+21", as MicroWizard routes it, so it reaches
// the Go handler of v:1e21; a Go result holding an integer JavaScript
// would round fails with a RangeError (out_of_range) instead of arriving
// rounded.
func TestNumbersServedAsJavaScriptRoutes(t *testing.T) {
	needNode(t, "microwizard")
	leak.Check(t)
	n := newNode(t, newTransport(t))
	mustAdd(t, n, "role:go,cmd:num,v:1e21", func(ctx context.Context, req runtime.Request) (any, error) {
		return map[string]any{"routed": req.Pattern().String()}, nil
	})
	mustAdd(t, n, "role:go,cmd:unsafe", func(ctx context.Context, req runtime.Request) (any, error) {
		return map[string]any{"id": unsafeID}, nil
	})
	got := runClient(t, n, "num", "unsafe")
	if r := got["num"]; r.Err != nil || r.Res["routed"] != "cmd:num,role:go,v:1e+21" {
		t.Errorf("act {v: 1e21}: got %+v (err %+v), want the handler of v:1e21", r.Res, r.Err)
	}
	if r := got["unsafe"]; r.Err == nil || r.Err.Name != "RangeError" || r.Err.Code != "out_of_range" {
		t.Errorf("a result holding %d: got %+v (err %+v), want a RangeError out_of_range", unsafeID, r.Res, r.Err)
	}
}

// TestNumbersCalledArriveAsSent: a Go caller's 1e21 reaches a real
// MicroWizard handler as the number 1e21; an integer JavaScript would
// round is refused before it is sent (out_of_range), as actE and as act.
func TestNumbersCalledArriveAsSent(t *testing.T) {
	needNode(t, "microwizard")
	leak.Check(t)
	addr := startServer(t, "node")
	for _, pin := range []string{"role:test,cmd:echo", "role:test,cmd:*"} {
		t.Run(pin, func(t *testing.T) {
			tr := newTransport(t, microwizard.WithPeer(addr, pin))
			n := callerNode(t, tr, "role:test,cmd:echo")
			res, err := n.Act(t.Context(), "role:test,cmd:echo", map[string]any{"v": 1e21})
			if err != nil {
				t.Fatal(err)
			}
			if v := res.Value().(map[string]any)["got"].(map[string]any)["v"]; v != 1e21 {
				t.Errorf("1e21 arrived as %#v", v)
			}
			_, err = n.Act(t.Context(), "role:test,cmd:echo", map[string]any{"id": unsafeID})
			var e *runtime.Error
			if !errors.As(err, &e) || e.Code != runtime.CodeOutOfRange {
				t.Errorf("Act with the integer %d: got %v, want out_of_range before sending", unsafeID, err)
			}
		})
	}
}
