// Command server serves shop.v1.PriceService over TCP: it prints the
// address it listens on and serves until its standard input closes.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	shopv1 "example.com/shop/gen/shop/v1"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

type prices struct {
	shopv1.UnimplementedPriceServiceHandler
}

func (prices) Quote(ctx context.Context, req *shopv1.QuoteRequest) (*shopv1.QuoteResponse, error) {
	return &shopv1.QuoteResponse{TotalCents: 250 * req.GetQuantity()}, nil
}

func (p prices) QuoteEach(ctx context.Context, s *runtime.ServerStream[*shopv1.QuoteRequest, *shopv1.QuoteResponse]) error {
	for {
		req, err := s.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		res, err := p.Quote(ctx, req)
		if err != nil {
			return err
		}
		if err := s.Send(res); err != nil {
			return err
		}
	}
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

func run() error {
	tr, err := tcp.New()
	if err != nil {
		return err
	}
	node, err := runtime.New(runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"))
	if err != nil {
		return err
	}
	defer node.Close()
	if err := shopv1.RegisterPriceServiceHandler(node, prices{}); err != nil {
		return err
	}
	fmt.Println(node.Addr())
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}
