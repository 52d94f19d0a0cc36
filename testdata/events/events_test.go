// This test is not built in place (the go tool skips testdata): the
// protoc-gen-wizard test TestCompileAndRoundTrip copies it into a temporary
// module beside the helpers generated from input.proto and runs it there.

package eventsv1_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	eventsv1 "example.com/golden/events"
	"github.com/google/go-cmp/cmp"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func newNode(t *testing.T, opts ...runtime.Option) *runtime.Node {
	t.Helper()
	n, err := runtime.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// received records the events each subscriber got, by subscriber name.
type received struct {
	mu  sync.Mutex
	got map[string][]proto.Message
}

func (r *received) add(name string, m proto.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got == nil {
		r.got = map[string][]proto.Message{}
	}
	r.got[name] = append(r.got[name], m)
}

// take returns what every subscriber got and forgets it.
func (r *received) take() map[string][]proto.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

// TestEvents emits through the generated helpers over TCP to two groups,
// billing (members b1 and b2) and shipping (member s1): each group gets an
// emitted event once, decoded into the typed message; a broadcast reaches
// every member; a subscriber's error reaches the emitter.
func TestEvents(t *testing.T) {
	ctx := t.Context()
	tr, err := tcp.New()
	if err != nil {
		t.Fatal(err)
	}
	var rec received
	members := []struct{ name, group string }{{"b1", "billing"}, {"b2", "billing"}, {"s1", "shipping"}}
	var addrs, ids []string
	for _, m := range members {
		n := newNode(t, runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"), runtime.WithService(m.group))
		err := eventsv1.OnOrderPlaced(n, "", func(ctx context.Context, ev *eventsv1.OrderPlaced) error {
			rec.add(m.name, ev)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// Each member also subscribes to OrderShipped in a group of its
		// own, after OrderPlaced: once the emitter sees all three groups of
		// OrderShipped, it knows every member's OrderPlaced subscription.
		err = eventsv1.OnOrderShipped(n, m.name, func(ctx context.Context, ev *eventsv1.OrderShipped) error {
			if m.name == "s1" && ev.GetOrderId() == "fail" {
				return runtime.Errorf(runtime.CodeFailedPrecondition, "s1 refuses %s", ev.GetOrderId())
			}
			rec.add(m.name, ev)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, n.Addr())
		ids = append(ids, n.ID())
	}
	emitter := newNode(t, runtime.WithTransport(tr), runtime.WithDiscovery(runtime.StaticPeers(addrs...)))
	wait, cancel := context.WithTimeout(ctx, time.Minute) // a guard: the catalogs arrive well before
	defer cancel()
	if err := emitter.WaitForSubscribers(wait, eventsv1.OrderShippedEventPattern, "b1", "b2", "s1"); err != nil {
		t.Fatal(err)
	}

	placed := &eventsv1.OrderPlaced{OrderId: "o-1", Skus: []string{"apple", "pear"}, At: timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC))}

	t.Run("emit", func(t *testing.T) {
		for range 10 {
			d, err := eventsv1.EmitOrderPlaced(ctx, emitter, placed)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(runtime.Delivery{Took: []string{"billing", "shipping"}}, sorted(d)); diff != "" {
				t.Errorf("Delivery (-want +got):\n%s", diff)
			}
			got := rec.take()
			billing := append(got["b1"], got["b2"]...)
			if len(billing) != 1 || len(got["s1"]) != 1 {
				t.Fatalf("billing got %d, shipping %d; want each once", len(billing), len(got["s1"]))
			}
			for _, m := range []proto.Message{billing[0], got["s1"][0]} {
				if diff := cmp.Diff(placed, m, protocmp.Transform()); diff != "" {
					t.Errorf("decoded event (-want +got):\n%s", diff)
				}
			}
		}
	})

	t.Run("broadcast", func(t *testing.T) {
		d, err := eventsv1.BroadcastOrderPlaced(ctx, emitter, placed)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(runtime.Delivery{Took: slices.Sorted(slices.Values(ids))}, sorted(d)); diff != "" {
			t.Errorf("Delivery (-want +got):\n%s", diff)
		}
		got := rec.take()
		for _, m := range members {
			if len(got[m.name]) != 1 {
				t.Errorf("%s got %d broadcasts, want 1", m.name, len(got[m.name]))
			}
		}
	})

	t.Run("quoted pattern value", func(t *testing.T) {
		d, err := eventsv1.EmitOrderShipped(ctx, emitter, &eventsv1.OrderShipped{OrderId: "o-2"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(runtime.Delivery{Took: []string{"b1", "b2", "s1"}}, sorted(d)); diff != "" {
			t.Errorf("Delivery (-want +got):\n%s", diff)
		}
		rec.take()
	})

	t.Run("subscriber error", func(t *testing.T) {
		d, err := eventsv1.EmitOrderShipped(ctx, emitter, &eventsv1.OrderShipped{OrderId: "fail"})
		if runtime.CodeOf(err) != runtime.CodeFailedPrecondition {
			t.Fatalf("err = %v; want the subscriber's FailedPrecondition", err)
		}
		if diff := cmp.Diff(runtime.Delivery{Took: []string{"b1", "b2"}, Missed: []string{"s1"}}, sorted(d)); diff != "" {
			t.Errorf("Delivery (-want +got):\n%s", diff)
		}
		rec.take()
	})
}

// TestEventsInProcess subscribes a nested event in the node's service
// group (group "") and emits it on the same node.
func TestEventsInProcess(t *testing.T) {
	n := newNode(t, runtime.WithService("orders"))
	got := make(chan *eventsv1.Order_Cancelled, 1)
	err := eventsv1.OnOrder_Cancelled(n, "", func(ctx context.Context, ev *eventsv1.Order_Cancelled) error {
		got <- ev
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &eventsv1.Order_Cancelled{OrderId: "o-3", Reason: "changed my mind"}
	d, err := eventsv1.EmitOrder_Cancelled(t.Context(), n, want)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(runtime.Delivery{Took: []string{"orders"}}, d); diff != "" {
		t.Errorf("Delivery (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, <-got, protocmp.Transform()); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
	subs := n.Subscriptions()
	if len(subs) != 1 || subs[0].Pattern.String() != eventsv1.Order_CancelledEventPattern || subs[0].Group != "orders" {
		t.Errorf("Subscriptions() = %+v; want %s in group orders", subs, eventsv1.Order_CancelledEventPattern)
	}
	// No subscriber: the emit is reported, not lost.
	if _, err := eventsv1.EmitOrderSent(t.Context(), n, &eventsv1.OrderSent{}); !errors.Is(err, runtime.ErrNoHandler) {
		t.Errorf("emit without subscribers: err = %v, want ErrNoHandler", err)
	}
}

// TestEventsNil: the helpers refuse a nil node or function with an error,
// not a panic.
func TestEventsNil(t *testing.T) {
	if _, err := eventsv1.EmitOrderPlaced(t.Context(), nil, &eventsv1.OrderPlaced{}); runtime.CodeOf(err) != runtime.CodeInvalidArgument {
		t.Errorf("EmitOrderPlaced(nil node): err = %v", err)
	}
	if _, err := eventsv1.BroadcastOrderPlaced(t.Context(), nil, &eventsv1.OrderPlaced{}); runtime.CodeOf(err) != runtime.CodeInvalidArgument {
		t.Errorf("BroadcastOrderPlaced(nil node): err = %v", err)
	}
	if err := eventsv1.OnOrderPlaced(nil, "", func(context.Context, *eventsv1.OrderPlaced) error { return nil }); runtime.CodeOf(err) != runtime.CodeInvalidArgument {
		t.Errorf("OnOrderPlaced(nil node): err = %v", err)
	}
	n := newNode(t)
	if err := eventsv1.OnOrderPlaced(n, "", nil); runtime.CodeOf(err) != runtime.CodeInvalidArgument {
		t.Errorf("OnOrderPlaced(nil fn): err = %v", err)
	}
}

// sorted returns d with its lists sorted: groups are delivered to at once.
func sorted(d runtime.Delivery) runtime.Delivery {
	slices.Sort(d.Took)
	slices.Sort(d.Missed)
	return d
}
