package wizotel_test

import (
	"testing"
	"time"

	wizotel "github.com/wizardmesh/wizard/otel"
	"github.com/wizardmesh/wizard/runtime/lb"
	"go.opentelemetry.io/otel/attribute"
)

// TestBreakerStates: a breaker of runtime/lb that opens after one
// failure counts its change from closed to open, by the states left and
// entered; without a meter provider the option does nothing.
func TestBreakerStates(t *testing.T) {
	tm := newTelemetry(t)
	bs, err := lb.NewBreakers[string](wizotel.BreakerStates(wizotel.WithMeterProvider(tm.mp)), lb.WithFailureThreshold(1, 1), lb.WithDelay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	br := bs.Get("a")
	if !br.Allow() {
		t.Fatal("a new breaker refused a call")
	}
	br.Failure()
	if !br.IsOpen() {
		t.Fatal("the breaker did not open after its one failure")
	}
	rm := tm.collect(t)
	if got, ok := sum(rm, "wizard.breaker.transitions", attribute.String("wizard.breaker.from", "closed"), attribute.String("wizard.breaker.to", "open")); !ok || got != 1 {
		t.Errorf("closed → open transitions: %d (%v), want 1", got, ok)
	}
	if _, err := lb.NewBreakers[string](wizotel.BreakerStates()); err != nil {
		t.Errorf("BreakerStates without a provider: %v", err)
	}
}
