package runtime_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/introspect"
)

// TestHealth_InProcess follows a node without a transport through its
// states: serving once New returns, draining from Shutdown's start while
// a handler runs, not serving once Shutdown returns (and after a second
// Close). The transports' conformance suites follow a listening node
// (transporttest's Health scenario).
func TestHealth_InProcess(t *testing.T) {
	n := newTestNode(t)
	if !n.Ready() || n.Health() != runtime.HealthServing {
		t.Fatalf("new node: Ready %v, Health %v; want true, serving", n.Ready(), n.Health())
	}
	started := make(chan struct{})
	release := make(chan struct{})
	mustAdd(t, n, "role:hold", func(ctx context.Context, r runtime.Request) (any, error) {
		close(started)
		<-release
		return nil, nil
	})
	called := make(chan error, 1)
	go func() {
		_, err := n.ActE(context.Background(), "role:hold", nil)
		called <- err
	}()
	<-started
	shut := make(chan error, 1)
	go func() { shut <- n.Shutdown(context.Background()) }()
	testwait.Until(t, "Shutdown begins", func() bool { return !n.Ready() })
	if h := n.Health(); h != runtime.HealthDraining {
		t.Errorf("draining: Health %v; want draining", h)
	}
	close(release)
	if err := testwait.Recv(t, called); err != nil {
		t.Errorf("the call in flight: %v", err)
	}
	if err := testwait.Recv(t, shut); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	for range 2 {
		if n.Ready() || n.Health() != runtime.HealthNotServing {
			t.Errorf("shut down: Ready %v, Health %v; want false, not_serving", n.Ready(), n.Health())
		}
		n.Close()
	}
}

// TestAdd_SystemPatternsReserved: the node serves sys:wizard patterns
// itself; a handler added for one would be shadowed for remote callers
// (before, Add took CatalogPattern and remote callers got the catalog).
func TestAdd_SystemPatternsReserved(t *testing.T) {
	n := newTestNode(t)
	for _, p := range []string{introspect.CatalogPattern, introspect.HealthPattern, "sys:wizard,cmd:other", "sys:wizard"} {
		err := n.Add(p, func(context.Context, runtime.Request) (any, error) { return "mine", nil })
		if runtime.CodeOf(err) != runtime.CodeInvalidArgument {
			t.Errorf("Add(%q) = %v; want invalid_argument", p, err)
		}
	}
	mustAdd(t, n, "sys:other,cmd:health", func(context.Context, runtime.Request) (any, error) { return "mine", nil })
}

// TestHealth_Text: the states' names, in JSON as the health answer
// carries them.
func TestHealth_Text(t *testing.T) {
	for h, want := range map[runtime.Health]string{runtime.HealthNotServing: "not_serving", runtime.HealthServing: "serving", runtime.HealthDraining: "draining"} {
		b, err := json.Marshal(h)
		if err != nil || string(b) != `"`+want+`"` {
			t.Errorf("Marshal(%d) = %s, %v; want %q", h, b, err, want)
		}
		var back runtime.Health
		if err := json.Unmarshal(b, &back); err != nil || back != h {
			t.Errorf("Unmarshal(%s) = %v, %v", b, back, err)
		}
	}
	var h runtime.Health
	if err := json.Unmarshal([]byte(`"sick"`), &h); err == nil {
		t.Error(`Unmarshal("sick") succeeded`)
	}
}
