package runtime_test

import (
	"context"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
)

// TestDefaultOptionAllocs: a Default option made once costs a call that
// carries it alone no allocation (its configuration is made with the
// option), and still answers a call that nothing serves, however often
// it is used.
func TestDefaultOptionAllocs(t *testing.T) {
	n := newTestNode(t)
	mustAdd(t, n, "role:echo", func(ctx context.Context, r runtime.Request) (any, error) { return nil, nil })
	ctx := context.Background()
	def := runtime.Default("fallback")
	plain := testing.AllocsPerRun(100, func() { _, _ = n.ActE(ctx, "role:echo", nil) })
	with := testing.AllocsPerRun(100, func() { _, _ = n.ActE(ctx, "role:echo", nil, def) })
	if with != plain {
		t.Errorf("%v allocations per call with a Default made once, %v without: want the same", with, plain)
	}
	for range 2 {
		res, err := n.ActE(ctx, "role:missing", nil, def)
		if err != nil || res.Value() != "fallback" {
			t.Fatalf("unserved call with Default: %v, %v; want fallback", res.Value(), err)
		}
	}
	res, err := n.ActE(ctx, "role:missing", nil, def, runtime.Timeout(0))
	if err != nil || res.Value() != "fallback" {
		t.Fatalf("unserved call with Default and another option: %v, %v; want fallback", res.Value(), err)
	}
}
