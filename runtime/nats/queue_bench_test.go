package nats_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wizardmesh/wizard/runtime/internal/testkit/natstest"
)

// BenchmarkQueueGroup measures what balancing by the broker would change,
// before building it: plain nats.go request/reply to two responders, each
// on a connection of its own, from 16 callers, where the caller picks the
// responder (its own subject each, as wizard's balancer does with node
// subjects) or the broker does (one subject, a queue group). Paired in
// one run, the order rotating; it reports each one's ns per call and the
// ratio queue/direct (above 1: the queue group is faster), and the
// share of calls the busier responder took under each.
func BenchmarkQueueGroup(b *testing.B) {
	br := natstest.Start(b)
	connect := func() *natsgo.Conn {
		nc, err := natsgo.Connect(br.URL())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
		return nc
	}
	var served [2]atomic.Int64
	for i := range 2 {
		nc := connect()
		echo := func(m *natsgo.Msg) {
			served[i].Add(1)
			_ = m.Respond(m.Data)
		}
		if _, err := nc.Subscribe(fmt.Sprintf("bench.node.%d", i), echo); err != nil {
			b.Fatal(err)
		}
		if _, err := nc.QueueSubscribe("bench.group", "q", echo); err != nil {
			b.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	cnc := connect()
	data := []byte("0123456789abcdef")
	var next atomic.Uint64
	direct := func(ctx context.Context) error {
		_, err := cnc.RequestWithContext(ctx, fmt.Sprintf("bench.node.%d", next.Add(1)%2), data)
		return err
	}
	queue := func(ctx context.Context) error {
		_, err := cnc.RequestWithContext(ctx, "bench.group", data)
		return err
	}
	contenders := []func(context.Context) error{direct, queue}
	const callers, round = 16, 256
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	var spent [2]time.Duration
	var busier [2]float64
	rounds := 0
	for b.Loop() {
		for j := range contenders {
			i := (j + rounds) % len(contenders)
			s0, s1 := served[0].Load(), served[1].Load()
			start := time.Now()
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
			d0, d1 := served[0].Load()-s0, served[1].Load()-s1
			busier[i] += float64(max(d0, d1)) / float64(d0+d1)
		}
		rounds++
	}
	calls := float64(rounds * round)
	b.ReportMetric(float64(spent[0].Nanoseconds())/calls, "ns/call-direct")
	b.ReportMetric(float64(spent[1].Nanoseconds())/calls, "ns/call-queue")
	b.ReportMetric(float64(spent[0])/float64(spent[1]), "queue/direct")
	b.ReportMetric(busier[0]/float64(rounds), "busier-share-direct")
	b.ReportMetric(busier[1]/float64(rounds), "busier-share-queue")
}
