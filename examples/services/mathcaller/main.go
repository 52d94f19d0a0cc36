// Command mathcaller calls the math service in another process through the
// generated client. With -peers it knows the server's address, not its
// patterns, which it learns from the server's catalog; with -gossip and
// -seeds it knows neither and finds both in the mesh.
//
//	go run ./examples/services/mathcaller -peers 127.0.0.1:7070
//	go run ./examples/services/mathcaller -gossip 127.0.0.1:0 -seeds 127.0.0.1:7946
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	"github.com/wizardmesh/wizard/examples/services/mesh"
	"github.com/wizardmesh/wizard/internal/transportname"
	"github.com/wizardmesh/wizard/runtime"
)

func main() {
	kind := flag.String("transport", "tcp", "transport: "+transportname.Names())
	discovery := mesh.AddFlags(flag.CommandLine, "127.0.0.1:7070")
	flag.Parse()
	if err := run(discovery, *kind); err != nil {
		fmt.Fprintln(os.Stderr, "mathcaller:", err)
		os.Exit(1)
	}
}

func run(discovery *mesh.Flags, kind string) error {
	// No logger: the caller's errors are its output. quic without the
	// TLS flags: a throwaway self-signed certificate and no verification,
	// for development.
	t, err := discovery.Transport(kind, nil)
	if err != nil {
		return err
	}
	o, err := discovery.Option(nil)
	if err != nil {
		return err
	}
	if o == nil {
		return fmt.Errorf("no way to find the math service: give -peers or -gossip")
	}
	node, err := runtime.New(runtime.WithTransport(t), o)
	if err != nil {
		return err
	}
	defer node.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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
	fmt.Println("sum(1, 2, 3.5) =", sum.GetSum())
	prod, err := math.Product(ctx, &mathv1.ProductRequest{Values: []float64{2, 3, 7}})
	if err != nil {
		return err
	}
	fmt.Println("product(2, 3, 7) =", prod.GetProduct())
	_, err = math.Divide(ctx, &mathv1.DivideRequest{Dividend: 1, Divisor: 0})
	fmt.Printf("divide(1, 0) -> %v: %v\n", runtime.CodeOf(err), err)
	return nil
}
