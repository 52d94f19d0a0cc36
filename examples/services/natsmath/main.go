// Command natsmath runs the math service and its caller over a NATS
// broker: the nodes know only the broker, find each other by NATS
// discovery and call through the broker. With -embedded it starts a
// broker of its own on 127.0.0.1, for a one-liner:
//
//	go run ./examples/services/natsmath -embedded
//
// Against a broker already running, in two processes:
//
//	go run ./examples/services/natsmath -nats nats://127.0.0.1:4222 -role server
//	go run ./examples/services/natsmath -nats nats://127.0.0.1:4222 -role caller
//
// -role both (the default) runs the server and the caller in one process.
// The server serves until interrupted, then shuts down gracefully.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	"github.com/wizardmesh/wizard/examples/services/mathsvc"
	"github.com/wizardmesh/wizard/examples/services/mesh"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/nats"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "natsmath:", err)
		os.Exit(1)
	}
}

// run parses args and runs what they ask for, printing to w. A server
// (-role server) serves until ctx ends.
func run(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("natsmath", flag.ContinueOnError)
	url := fs.String("nats", "nats://127.0.0.1:4222", "the broker's URLs, comma-separated")
	embedded := fs.Bool("embedded", false, "start a broker in this process, on 127.0.0.1 and a free port (-nats is ignored)")
	role := fs.String("role", "both", "server, caller or both")
	creds := fs.String("creds", "", "a NATS credentials file to authenticate with")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *role != "server" && *role != "caller" && *role != "both" {
		return fmt.Errorf("unknown -role %q (want server, caller or both)", *role)
	}
	if *embedded {
		b, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
		if err != nil {
			return err
		}
		go b.Start()
		defer b.Shutdown()
		if !b.ReadyForConnections(10 * time.Second) {
			return errors.New("the embedded broker did not start within 10s")
		}
		*url = b.ClientURL()
		fmt.Fprintln(w, "natsmath: embedded broker at", *url)
	}
	opts := []nats.Option{nats.WithURL(*url), nats.WithLogger(mesh.Logger())}
	if *creds != "" {
		opts = append(opts, nats.WithCredentials(*creds))
	}
	newNode := func(listen bool) (*runtime.Node, error) {
		tr, err := nats.New(opts...)
		if err != nil {
			return nil, err
		}
		d, err := nats.NewDiscovery(tr)
		if err != nil {
			return nil, err
		}
		nopts := []runtime.Option{runtime.WithTransport(tr), runtime.WithDiscovery(d), runtime.WithLogger(mesh.Logger())}
		if listen { // port 0 picks a subject: wizard.node.<random>
			nopts = append(nopts, runtime.WithListen(":0"))
		}
		return runtime.New(nopts...)
	}
	if *role != "caller" {
		srv, err := newNode(true)
		if err != nil {
			return err
		}
		defer srv.Close()
		if err := mathsvc.Register(srv); err != nil {
			return err
		}
		fmt.Fprintf(w, "natsmath: serving %d patterns on nats %s\n", len(srv.Patterns()), srv.Addr())
		if *role == "server" {
			<-ctx.Done()
			shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return srv.Shutdown(shutdown)
		}
	}
	cl, err := newNode(false) // a caller only: it learns the mesh, unannounced
	if err != nil {
		return err
	}
	defer cl.Close()
	return call(ctx, w, cl)
}

// call finds the math service and calls it.
func call(ctx context.Context, w io.Writer, node *runtime.Node) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := node.WaitFor(ctx, mathv1.MathServiceSumPattern); err != nil {
		return fmt.Errorf("math service not found: %w", err)
	}
	math, err := mathv1.NewMathServiceClient(node)
	if err != nil {
		return err
	}
	sum, err := math.Sum(ctx, &mathv1.SumRequest{Values: []float64{1, 2, 3.5}})
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "sum(1, 2, 3.5) =", sum.GetSum())
	prod, err := math.Product(ctx, &mathv1.ProductRequest{Values: []float64{2, 3, 7}})
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "product(2, 3, 7) =", prod.GetProduct())
	_, err = math.Divide(ctx, &mathv1.DivideRequest{Dividend: 1, Divisor: 0})
	fmt.Fprintf(w, "divide(1, 0) -> %v: %v\n", runtime.CodeOf(err), err)
	return nil
}
