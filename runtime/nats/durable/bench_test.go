package durable

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

// BenchmarkEmit measures Emit alone: a publication and its PubAck from an
// embedded broker with a file store.
func BenchmarkEmit(b *testing.B) {
	br := startJetStream(b)
	m := newMember(b, []string{br.URL()}, "orders")
	msg := map[string]any{"id": "1"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.ev.Emit(b.Context(), "role:order,event:placed", msg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEmitHandled measures an event emitted and handled by one group
// of one member: the emit, the delivery, the claim, the run, the record
// and the ack; events are emitted one after another and handled
// concurrently.
func BenchmarkEmitHandled(b *testing.B) {
	br := startJetStream(b)
	m := newMember(b, []string{br.URL()}, "orders")
	var handled atomic.Int64
	all := make(chan struct{})
	var want atomic.Int64
	want.Store(-1)
	err := m.ev.Subscribe(b.Context(), "role:order", "billing", func(ctx context.Context, req runtime.Request) (any, error) {
		if handled.Add(1) == want.Load() {
			close(all)
		}
		return nil, nil
	}, Concurrency(64))
	if err != nil {
		b.Fatal(err)
	}
	msg := map[string]any{"id": "1"}
	b.ReportAllocs()
	n := int64(0)
	for b.Loop() {
		if _, err := m.ev.Emit(b.Context(), "role:order,event:placed", msg); err != nil {
			b.Fatal(err)
		}
		n++
	}
	want.Store(n)
	if handled.Load() < n {
		testwait.Recv(b, all)
	}
}
