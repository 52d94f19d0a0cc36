package wizotel_test

import (
	"context"
	"log"

	wizotel "github.com/wizardmesh/wizard/otel"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// A node instrumented with the SDK's providers: its calls and the calls it
// serves become spans and measurements.
func ExampleInstrument() {
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	mp := sdkmetric.NewMeterProvider()
	defer mp.Shutdown(context.Background())

	tr, err := tcp.New()
	if err != nil {
		log.Fatal(err)
	}
	node, err := runtime.New(
		wizotel.Instrument(wizotel.WithTracerProvider(tp), wizotel.WithMeterProvider(mp)),
		runtime.WithTransport(tr),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()
}
