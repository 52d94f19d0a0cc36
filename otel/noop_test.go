package wizotel_test

import (
	"context"
	"testing"

	wizotel "github.com/wizardmesh/wizard/otel"
	"github.com/wizardmesh/wizard/runtime"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// TestNoProviderCostsNothing: with no provider (none given, the globals
// untouched) or noop ones, Instrument adds nothing to a node: its
// in-process calls still allocate nothing.
func TestNoProviderCostsNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  runtime.Option
	}{
		{"globals", wizotel.Instrument()},
		{"noop", wizotel.Instrument(wizotel.WithTracerProvider(tracenoop.NewTracerProvider()), wizotel.WithMeterProvider(metricnoop.NewMeterProvider()))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, tc.opt)
			if err := n.Add("role:echo", func(ctx context.Context, r runtime.Request) (any, error) { return nil, nil }); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := n.ActE(ctx, "role:echo", nil); err != nil {
				t.Fatal(err)
			}
			if a := testing.AllocsPerRun(100, func() { _, _ = n.ActE(ctx, "role:echo", nil) }); a != 0 {
				t.Errorf("%v allocations per call, want 0", a)
			}
		})
	}
}
