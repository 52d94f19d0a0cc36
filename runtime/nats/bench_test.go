package nats_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/proto"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/cputime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/natstest"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpb"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/nats"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// BenchmarkRemoteCall is the suite's benchmark through an embedded
// broker.
func BenchmarkRemoteCall(b *testing.B) {
	br := natstest.Start(b)
	transporttest.Benchmark(b, func(t testing.TB, log *slog.Logger) runtime.Transport {
		return newTransport(t, br.URL(), nats.WithLogger(log))
	})
}

// BenchmarkStreams is the suite's stream benchmark through an embedded
// broker, between two nodes (the runtime's typed streams, protobuf
// messages).
func BenchmarkStreams(b *testing.B) {
	br := natstest.Start(b)
	transporttest.BenchmarkStreams(b, func(t testing.TB, log *slog.Logger) runtime.Transport {
		return newTransport(t, br.URL(), nats.WithLogger(log))
	})
}

// BenchmarkNATS compares, paired in one run, the same protobuf sum call
// made three ways: a generated wizard client over NATS, a nats.go micro
// service called with nc.Request through the same embedded broker, and
// the generated wizard client over loopback TCP. Each round makes 256
// calls (512 with 128 callers) with each contender in turn (the order
// rotating), from 1, 16 or 128 callers at once, so that drift in the machine's load falls on all
// alike. It reports each one's ns per call and the ratios: nats/micro
// (above 1 is faster than micro) and nats/tcp (the fraction of wizard
// TCP's calls per second). Where /proc/self/io tells, it reports the
// write system calls per call too (the process's: both ends and the
// broker), and where getrusage tells, the process's CPU time per call:
// on a machine shared with other work, wall time per call swings with
// the others' load, CPU time much less.
func BenchmarkNATS(b *testing.B) {
	br := natstest.Start(b)
	req := &testpb.SumRequest{Values: []float64{1, 2}}

	// wizard over NATS and over TCP.
	wizard := func(tr, trc runtime.Transport) func(context.Context) error {
		srv := transporttest.NewServer(b, tr)
		if err := testpb.RegisterMathServiceHandler(srv, transporttest.MathService{}); err != nil {
			b.Fatal(err)
		}
		math := transporttest.MathClient(b, transporttest.NewClient(b, trc, testpb.MathServiceSumPattern, nil, srv.Addr()))
		return func(ctx context.Context) error {
			res, err := math.Sum(ctx, req)
			if err == nil && res.GetSum() != 3 {
				err = fmt.Errorf("sum = %v", res.GetSum())
			}
			return err
		}
	}
	tcpTransport := func() runtime.Transport {
		t, err := tcp.New()
		if err != nil {
			b.Fatal(err)
		}
		return t
	}
	overNATS := wizard(newTransport(b, br.URL()), newTransport(b, br.URL()))
	overTCP := wizard(tcpTransport(), tcpTransport())

	// nats.go micro: a service on one connection, its caller on another.
	snc, err := natsgo.Connect(br.URL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(snc.Close)
	svc, err := micro.AddService(snc, micro.Config{
		Name: "math", Version: "1.0.0",
		Endpoint: &micro.EndpointConfig{Subject: "math.sum", Handler: micro.HandlerFunc(func(r micro.Request) {
			var in testpb.SumRequest
			if err := proto.Unmarshal(r.Data(), &in); err != nil {
				_ = r.Error("400", err.Error(), nil)
				return
			}
			var s float64
			for _, v := range in.GetValues() {
				s += v
			}
			out, _ := proto.Marshal(&testpb.SumResponse{Sum: s})
			_ = r.Respond(out)
		})},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = svc.Stop() })
	cnc, err := natsgo.Connect(br.URL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cnc.Close)
	overMicro := func(ctx context.Context) error {
		data, err := proto.Marshal(req)
		if err != nil {
			return err
		}
		m, err := cnc.RequestWithContext(ctx, "math.sum", data)
		if err != nil {
			return err
		}
		var out testpb.SumResponse
		if err := proto.Unmarshal(m.Data, &out); err != nil || out.GetSum() != 3 {
			return fmt.Errorf("sum = %v, %v", out.GetSum(), err)
		}
		return nil
	}

	contenders := []func(context.Context) error{overNATS, overMicro, overTCP}
	for _, callers := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			round := max(256, 4*callers)
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			var spent [3]time.Duration
			var writes [3]uint64
			var cpu [3]time.Duration // this process's: both ends and the broker
			rounds := 0
			for b.Loop() {
				for j := range contenders {
					i := (j + rounds) % len(contenders)
					w0, c0, start := writeSyscalls(), cputime.Process(), time.Now()
					var wg sync.WaitGroup
					for range callers {
						wg.Go(func() {
							for range round / callers {
								if err := contenders[i](ctx); err != nil {
									b.Error(err)
									return
								}
							}
						})
					}
					wg.Wait()
					spent[i] += time.Since(start)
					writes[i] += writeSyscalls() - w0
					cpu[i] += cputime.Process() - c0
				}
				rounds++
			}
			calls := float64(rounds * round)
			b.ReportMetric(float64(spent[0].Nanoseconds())/calls, "ns/call-nats")
			b.ReportMetric(float64(spent[1].Nanoseconds())/calls, "ns/call-micro")
			b.ReportMetric(float64(spent[2].Nanoseconds())/calls, "ns/call-tcp")
			if cputime.Process() > 0 {
				b.ReportMetric(float64(cpu[0].Nanoseconds())/calls, "cpu-ns/call-nats")
				b.ReportMetric(float64(cpu[1].Nanoseconds())/calls, "cpu-ns/call-micro")
				b.ReportMetric(float64(cpu[2].Nanoseconds())/calls, "cpu-ns/call-tcp")
			}
			if writeSyscalls() > 0 {
				b.ReportMetric(float64(writes[0])/calls, "writes/call-nats")
				b.ReportMetric(float64(writes[1])/calls, "writes/call-micro")
				b.ReportMetric(float64(writes[2])/calls, "writes/call-tcp")
			}
			b.ReportMetric(float64(spent[1])/float64(spent[0]), "nats/micro")
			b.ReportMetric(float64(spent[2])/float64(spent[0]), "nats/tcp")
		})
	}
}

// writeSyscalls is the process's count of write system calls so far, or
// 0 where /proc/self/io does not tell.
func writeSyscalls() uint64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
