// Command client asks the server at the address given as its argument for
// the price of 3 apples, then for the prices of 1 and 2 pears on a stream.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	shopv1 "example.com/shop/gen/shop/v1"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}

func run(server string) error {
	tr, err := tcp.New()
	if err != nil {
		return err
	}
	node, err := runtime.New(runtime.WithTransport(tr), runtime.WithDiscovery(runtime.StaticPeers(server)))
	if err != nil {
		return err
	}
	defer node.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := node.WaitFor(ctx, shopv1.PriceServiceQuotePattern); err != nil {
		return err
	}
	prices, err := shopv1.NewPriceServiceClient(node)
	if err != nil {
		return err
	}
	res, err := prices.Quote(ctx, &shopv1.QuoteRequest{Item: "apple", Quantity: 3})
	if err != nil {
		return err
	}
	fmt.Println("total_cents:", res.GetTotalCents())

	s, err := prices.QuoteEach(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	for _, n := range []int64{1, 2} {
		if err := s.Send(&shopv1.QuoteRequest{Item: "pear", Quantity: n}); err != nil {
			return err
		}
		res, err := s.Recv()
		if err != nil {
			return err
		}
		fmt.Println("each:", res.GetTotalCents())
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	if _, err := s.Recv(); err != io.EOF {
		return fmt.Errorf("the stream ended with %v, want io.EOF", err)
	}
	return nil
}
