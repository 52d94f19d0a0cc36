package durable_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/nats/durable"
)

// An event space on a JetStream broker: the billing group subscribes to
// placed orders, an order is emitted, and billing handles it once.
func Example() {
	// A broker with JetStream, in the process (for the example).
	dir, _ := os.MkdirTemp("", "wizard-durable-example")
	defer os.RemoveAll(dir)
	s, _ := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	go s.Start()
	defer s.Shutdown()
	if !s.ReadyForConnections(10 * time.Second) {
		fmt.Println("the broker did not start")
		return
	}

	ctx := context.Background()
	nc, err := natsgo.Connect(s.ClientURL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Println(err)
		return
	}
	node, err := runtime.New(runtime.WithService("billing"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer node.Close()

	events, err := durable.New(ctx, node, js, "orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer events.Close()

	billed := make(chan string)
	err = events.Subscribe(ctx, "role:order,event:placed", "", func(ctx context.Context, req runtime.Request) (any, error) {
		id, _ := req.String("id")
		billed <- fmt.Sprintf("%s billed order %s", req.Group(), id)
		return nil, nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	rc, err := events.Emit(ctx, "role:order,event:placed", map[string]any{"id": "7"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("stored as event", rc.Seq, "of", rc.Stream)
	fmt.Println(<-billed)
	// Output:
	// stored as event 1 of wizard_events_orders
	// billing billed order 7
}
