// Command prometheus runs a small wizard mesh over TCP whose nodes are
// instrumented with wizotel, and serves their metrics at /metrics in the
// Prometheus text format through the OpenTelemetry Prometheus exporter:
//
//	go run ./examples/prometheus -listen 127.0.0.1:9464
//	curl -s 127.0.0.1:9464/metrics | grep rpc_server_call_duration
//
// A math node serves the typed MathService (Sum, Divide) and an untyped
// greeting; a caller node calls them (a division by zero among them) and
// keeps calling Sum once a second until interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	wizotel "github.com/wizardmesh/wizard/otel"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/lb"
	"github.com/wizardmesh/wizard/runtime/tcp"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9464", "the address to serve /metrics on")
	calls := flag.Int("calls", 10, "the calls of each kind the caller makes at start")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := run(ctx, *listen, *calls, time.Second, func(url string) {
		fmt.Println("metrics at", url, "(interrupt to stop)")
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "prometheus:", err)
		os.Exit(1)
	}
}

// run starts the mesh and the metrics server on listen, makes calls of
// each kind, tells ready the URL of the metrics, then calls Sum every
// tick (never, for a tick of 0) until ctx ends.
func run(ctx context.Context, listen string, calls int, tick time.Duration, ready func(url string)) error {
	reg := promclient.NewRegistry()
	exporter, err := prometheus.New(prometheus.WithRegisterer(reg))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())
	instrument := wizotel.Instrument(wizotel.WithMeterProvider(mp))

	math, err := newMath(instrument)
	if err != nil {
		return err
	}
	defer math.Close()
	caller, err := newCaller(instrument, mp, math.Addr())
	if err != nil {
		return err
	}
	defer caller.Close()

	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	defer srv.Close()

	client, err := mathv1.NewMathServiceClient(caller)
	if err != nil {
		return err
	}
	if err := callAll(ctx, caller, client, calls); err != nil {
		return err
	}
	ready("http://" + l.Addr().String() + "/metrics")
	var ticks <-chan time.Time
	if tick > 0 {
		t := time.NewTicker(tick)
		defer t.Stop()
		ticks = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-served:
			return err
		case <-ticks:
			if _, err := client.Sum(ctx, &mathv1.SumRequest{Values: []float64{1, 2, 3}}); err != nil && ctx.Err() == nil {
				return err
			}
		}
	}
}

// math serves MathService's Sum and Divide, and greetings.
type math struct {
	mathv1.UnimplementedMathServiceHandler
}

func (math) Sum(_ context.Context, r *mathv1.SumRequest) (*mathv1.SumResponse, error) {
	var s float64
	for _, v := range r.GetValues() {
		s += v
	}
	return &mathv1.SumResponse{Sum: s}, nil
}

func (math) Divide(_ context.Context, r *mathv1.DivideRequest) (*mathv1.DivideResponse, error) {
	if r.GetDivisor() == 0 {
		return nil, runtime.Errorf(runtime.CodeInvalidArgument, "division by zero")
	}
	return &mathv1.DivideResponse{Quotient: r.GetDividend() / r.GetDivisor()}, nil
}

func newMath(instrument runtime.Option) (*runtime.Node, error) {
	tr, err := tcp.New()
	if err != nil {
		return nil, err
	}
	n, err := runtime.New(instrument, runtime.WithID("math"), runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"), runtime.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, err
	}
	if err := mathv1.RegisterMathServiceHandler(n, math{}); err == nil {
		err = n.Add("role:greet,lang:*", func(_ context.Context, r runtime.Request) (any, error) {
			return fmt.Sprintf("hello, %v", r.Get("name")), nil
		})
	}
	if err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// newCaller makes the node that calls addr, with breakers whose state
// changes are counted.
func newCaller(instrument runtime.Option, mp *sdkmetric.MeterProvider, addr string) (*runtime.Node, error) {
	tr, err := tcp.New()
	if err != nil {
		return nil, err
	}
	breakers, err := lb.NewBreakers[*runtime.Target](wizotel.BreakerStates(wizotel.WithMeterProvider(mp)))
	if err != nil {
		return nil, err
	}
	n, err := runtime.New(instrument, runtime.WithID("caller"), runtime.WithTransport(tr),
		runtime.WithDiscovery(runtime.StaticPeers(addr)),
		runtime.WithBreakers(func(t *runtime.Target) runtime.Breaker { return breakers.Get(t) }),
		runtime.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range []string{mathv1.MathServiceSumPattern, mathv1.MathServiceDividePattern, "role:greet,lang:en"} {
		if err := n.WaitFor(ctx, p); err != nil {
			n.Close()
			return nil, err
		}
	}
	return n, nil
}

// callAll makes calls calls of each kind: typed sums and divisions (one by
// zero), and untyped greetings.
func callAll(ctx context.Context, caller *runtime.Node, client mathv1.MathServiceClient, calls int) error {
	for i := range calls {
		if _, err := client.Sum(ctx, &mathv1.SumRequest{Values: []float64{float64(i), 1}}); err != nil {
			return err
		}
		divisor := float64(i) // the first divides by zero
		_, err := client.Divide(ctx, &mathv1.DivideRequest{Dividend: 1, Divisor: divisor})
		if want := divisor == 0; want != (runtime.CodeOf(err) == runtime.CodeInvalidArgument) {
			return errors.Join(fmt.Errorf("divide by %v", divisor), err)
		}
		if _, err := caller.ActE(ctx, "role:greet", map[string]any{"lang": "en", "name": "Ada"}, runtime.Mixin("lang")); err != nil {
			return err
		}
	}
	return nil
}
