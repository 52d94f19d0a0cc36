package wizotel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// The names of the durable events' instruments.
const (
	metricDurableDelivered    = "wizard.event.durable.delivered"
	metricDurableRedelivered  = "wizard.event.durable.redelivered"
	metricDurableDeadLettered = "wizard.event.durable.dead_lettered"
	metricDurablePending      = "wizard.event.durable.pending"
)

// DurableStats are the figures of a group of durable events, as an event
// engine that keeps them (a broker's consumer per group) reports them.
type DurableStats struct {
	// Group is the group the figures are of.
	Group string
	// Delivered counts the deliveries made to the group, redeliveries
	// included; Redelivered those that were not an event's first.
	Delivered, Redelivered uint64
	// DeadLettered counts the events given up on after their maximum
	// deliveries and sent to the dead-letter subject.
	DeadLettered uint64
	// Pending is the group's lag: the events not yet delivered to it and
	// those delivered and not yet acknowledged.
	Pending uint64
}

// ObserveDurable reports the figures stats returns, per group, at each
// collection of mp's readers: wizard.event.durable.delivered,
// .redelivered and .dead_lettered as counters, .pending (the consumer
// lag) as a gauge, each by messaging.consumer.group.name. stats is
// called from the readers' goroutines with their ctx; the figures it
// returns with an error are reported, and the error handed to
// otel.Handle. A nil mp means the global one (otel.GetMeterProvider).
// The function returned stops the reports.
func ObserveDurable(mp metric.MeterProvider, stats func(ctx context.Context) ([]DurableStats, error)) (stop func(), err error) {
	if stats == nil {
		return nil, errors.New("wizard: ObserveDurable: nil stats function")
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(scope, metric.WithSchemaURL(semconv.SchemaURL))
	var errs [4]error
	var delivered, redelivered, dead metric.Int64ObservableCounter
	var pending metric.Int64ObservableGauge
	delivered, errs[0] = meter.Int64ObservableCounter(metricDurableDelivered, metric.WithUnit("{delivery}"),
		metric.WithDescription("The deliveries of durable events made to a group, redeliveries included, by group."))
	redelivered, errs[1] = meter.Int64ObservableCounter(metricDurableRedelivered, metric.WithUnit("{delivery}"),
		metric.WithDescription("The deliveries of durable events made to a group that were not an event's first, by group."))
	dead, errs[2] = meter.Int64ObservableCounter(metricDurableDeadLettered, metric.WithUnit("{event}"),
		metric.WithDescription("The durable events of a group given up on after their maximum deliveries and dead-lettered, by group."))
	pending, errs[3] = meter.Int64ObservableGauge(metricDurablePending, metric.WithUnit("{event}"),
		metric.WithDescription("A group's lag: the durable events not yet delivered to it or not yet acknowledged, by group."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	reg, err := meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		groups, err := stats(ctx)
		for _, g := range groups {
			by := metric.WithAttributeSet(attribute.NewSet(messagingSystem, keyGroup.String(g.Group)))
			o.ObserveInt64(delivered, clamp(g.Delivered), by)
			o.ObserveInt64(redelivered, clamp(g.Redelivered), by)
			o.ObserveInt64(dead, clamp(g.DeadLettered), by)
			o.ObserveInt64(pending, clamp(g.Pending), by)
		}
		return err
	}, delivered, redelivered, dead, pending)
	if err != nil {
		return nil, err
	}
	return func() { _ = reg.Unregister() }, nil
}

// clamp is v as an int64 measurement, at most the largest one.
func clamp(v uint64) int64 {
	if v > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(v)
}
