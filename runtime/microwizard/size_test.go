package microwizard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/microwizard"
)

// sizeOf answers the length of the message's string s and its number of
// root fields.
func sizeOf(ctx context.Context, req runtime.Request) (any, error) {
	m, _ := req.Msg().(map[string]any)
	s, _ := m["s"].(string)
	return map[string]any{"len": len(s), "keys": len(m)}, nil
}

// bigCallTimeout gives the MicroWizard clients the test starts a timeout
// of 15 s: a call of megabytes takes longer than the default 1.5 s under
// the race detector on a loaded machine.
func bigCallTimeout(t *testing.T) { t.Setenv("TIMEOUT", "15000") }

// wideMessage is a message of n root number fields f0..f(n-1).
func wideMessage(n int) map[string]any {
	m := make(map[string]any, n)
	for i := range n {
		m[fmt.Sprintf("f%d", i)] = i
	}
	return m
}

// TestMicroWizardSizedMessagesServed: a real MicroWizard client's act
// with a 1 MiB string, and one with 1,000 root fields, reach the Go
// handler whole: the node's pattern bounds (4 KiB, 64 keys) apply to the
// keys its patterns use, not to the data.
func TestMicroWizardSizedMessagesServed(t *testing.T) {
	needNode(t, "microwizard")
	leak.Check(t)
	n := newNode(t, newTransport(t))
	mustAdd(t, n, "role:go,cmd:size", sizeOf)
	bigCallTimeout(t)
	got := runClient(t, n, "warm", "big", "wide")
	if r := got["big"]; r.Err != nil || r.Res["len"] != float64(1<<20) {
		t.Errorf("act with a 1 MiB string: got %+v (err %+v), want len %d", r.Res, r.Err, 1<<20)
	}
	if r := got["wide"]; r.Err != nil || r.Res["keys"] != 1002.0 {
		t.Errorf("act with 1,000 fields: got %+v (err %+v), want 1002 keys (with role and cmd)", r.Res, r.Err)
	}
}

// TestMicroWizardSizedMessagesCalled: a Go caller's Act with a 1 MiB
// string, and one with 1,000 root fields, reach a real MicroWizard
// handler whole, as actE (a pin without globs) and as act (a glob pin).
func TestMicroWizardSizedMessagesCalled(t *testing.T) {
	needNode(t, "microwizard")
	leak.Check(t)
	addr := startServer(t, "node")
	for _, pin := range []string{"role:test,cmd:size", "role:test,cmd:*"} {
		t.Run(pin, func(t *testing.T) {
			tr := newTransport(t, microwizard.WithPeer(addr, pin))
			n := callerNode(t, tr, "role:test,cmd:size")
			res, err := n.Act(t.Context(), "role:test,cmd:size", map[string]any{"s": strings.Repeat("x", 1<<20)})
			if err != nil || res.Value().(map[string]any)["len"] != float64(1<<20) {
				t.Errorf("Act with a 1 MiB string: got %v, %v; want len %d", res, err, 1<<20)
			}
			res, err = n.Act(t.Context(), "role:test,cmd:size", wideMessage(1000))
			if err != nil {
				t.Fatalf("Act with 1,000 fields: %v", err)
			}
			if k := res.Value().(map[string]any)["keys"].(float64); k < 1000 {
				t.Errorf("Act with 1,000 fields: the handler got %v root fields", k)
			}
		})
	}
}

// TestSenecaSizedMessagesServed: a real Seneca 3 client's act with a
// 1 MiB string, and one with 1,000 root fields, reach the Go handler
// whole; one over the line bound (here 1.5 MiB) fails at once, and the
// connection serves on.
func TestSenecaSizedMessagesServed(t *testing.T) {
	needNode(t, "seneca")
	leak.Check(t)
	n := newNode(t, newTransport(t, microwizard.WithSeneca("go-seneca-size"), microwizard.WithMaxLine(3<<19)))
	mustAdd(t, n, "role:go,cmd:size", sizeOf)
	_, port, _ := strings.Cut(n.Addr(), "127.0.0.1:")
	p := startNode(t, "sn-client.js", port, "huge", "big", "wide")
	got := map[string]senecaResult{}
	for {
		var r senecaResult
		p.next(t, &r)
		if r.Done {
			break
		}
		got[r.Name] = r
	}
	if r := got["big"]; r.Err != nil || r.Res["len"] != float64(1<<20) {
		t.Errorf("act with a 1 MiB string: got %+v (err %v), want len %d", r.Res, r.Err["message"], 1<<20)
	}
	// Seneca adds fields of its own to role, cmd and the 1,000.
	if r := got["wide"]; r.Err != nil || r.Res["keys"] == nil || r.Res["keys"].(float64) < 1002 {
		t.Errorf("act with 1,000 fields: got %+v (err %v), want 1002 keys or more", r.Res, r.Err["message"])
	}
	if msg, _ := got["huge"].Err["message"].(string); !strings.Contains(msg, "line bound") {
		t.Errorf("act with a 2 MiB string over a 1.5 MiB bound: got %+v, want the line bound named", got["huge"])
	}
}
