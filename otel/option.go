package wizotel

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Option configures [Instrument] and [BreakerStates].
type Option interface{ apply(*config) }

type config struct {
	tp   trace.TracerProvider
	mp   metric.MeterProvider
	prop propagation.TextMapPropagator
	w3c  *w3c // prop's propagation without a carrier, when prop is W3C trace context (and baggage)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithTracerProvider sets the provider of the spans; by default the
// global one (otel.GetTracerProvider) as it is when [Instrument] is
// called. A nil tp means the default.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tp = tp })
}

// WithMeterProvider sets the provider of the metric instruments; by
// default the global one (otel.GetMeterProvider) as it is when
// [Instrument] is called. A nil mp means the default.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}

// WithPropagators sets how trace context travels in call metadata; by
// default the global propagator (otel.GetTextMapPropagator) once one is
// set, else W3C trace context and baggage (the traceparent, tracestate
// and baggage keys). A nil p means the default.
func WithPropagators(p propagation.TextMapPropagator) Option {
	return optionFunc(func(c *config) { c.prop = p })
}

// The global providers as the otel package starts them: delegates that
// record nothing until a provider is set. Seen when Instrument is called,
// they turn tracing or metrics off, so that the interceptors cost nothing.
var (
	defaultTracerProvider = otel.GetTracerProvider()
	defaultMeterProvider  = otel.GetMeterProvider()
	defaultPropagator     = otel.GetTextMapPropagator()
)

// newConfig applies opts over the defaults. A tracer or meter provider
// that records nothing (the global one before any is set, or a noop one)
// is left nil: off.
func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.prop == nil {
		c.prop = otel.GetTextMapPropagator()
		if c.prop == defaultPropagator {
			c.prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
			c.w3c = &w3c{baggage: true}
		}
	}
	switch c.prop.(type) {
	case propagation.TraceContext, *propagation.TraceContext:
		c.w3c = &w3c{}
	}
	switch c.tp.(type) {
	case tracenoop.TracerProvider, *tracenoop.TracerProvider:
		c.tp = nil
	}
	if c.tp == defaultTracerProvider {
		c.tp = nil
	}
	switch c.mp.(type) {
	case metricnoop.MeterProvider, *metricnoop.MeterProvider:
		c.mp = nil
	}
	if c.mp == defaultMeterProvider {
		c.mp = nil
	}
	return c
}
