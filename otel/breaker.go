package wizotel

import (
	"context"

	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/wizardmesh/wizard/runtime/lb"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

// BreakerStates returns the option of runtime/lb's breakers
// ([lb.NewBreakers]) that counts their state changes, as the counter
// wizard.breaker.transitions by the states left and entered (closed,
// open, half-open), on the meter provider of opts ([WithMeterProvider],
// else the global one). Without a meter provider it does nothing.
func BreakerStates(opts ...Option) lb.BreakerOption {
	c := newConfig(opts)
	if c.mp == nil {
		return lb.WithCircuitBreaker(func(circuitbreaker.Builder[any]) {})
	}
	counter, err := c.mp.Meter(scope).Int64Counter(metricBreaker, metric.WithUnit("{transition}"),
		metric.WithDescription("The state changes of the circuit breakers of a node's targets, by the state left and the state entered."))
	if err != nil {
		otel.Handle(err)
		return lb.WithCircuitBreaker(func(circuitbreaker.Builder[any]) {})
	}
	return lb.WithCircuitBreaker(func(b circuitbreaker.Builder[any]) {
		b.OnStateChanged(func(e circuitbreaker.StateChangedEvent) {
			counter.Add(context.Background(), 1, metric.WithAttributes(
				keyFrom.String(stateName(e.OldState)), keyTo.String(stateName(e.NewState))))
		})
	})
}

func stateName(s circuitbreaker.State) string {
	switch s {
	case circuitbreaker.ClosedState:
		return "closed"
	case circuitbreaker.OpenState:
		return "open"
	case circuitbreaker.HalfOpenState:
		return "half-open"
	}
	return s.String()
}
