package quic_test

import (
	"context"
	"fmt"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/quic"
)

// Two nodes call each other over QUIC. Real deployments give certificates
// with quic.WithServerTLS and quic.WithClientTLS; the self-signed
// certificate here is for the example only.
func Example() {
	tr, err := quic.New(quic.WithInsecureSelfSigned())
	if err != nil {
		panic(err)
	}

	server, err := runtime.New(runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"))
	if err != nil {
		panic(err)
	}
	defer server.Close()
	server.Add("role:math,cmd:sum", func(ctx context.Context, r runtime.Request) (any, error) {
		return map[string]any{"r": r.Get("a").(float64) + r.Get("b").(float64)}, nil
	})

	client, err := runtime.New(runtime.WithTransport(tr), runtime.WithDiscovery(runtime.StaticPeers(server.Addr())))
	if err != nil {
		panic(err)
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.WaitFor(ctx, "role:math,cmd:sum"); err != nil {
		panic(err)
	}
	res, err := client.Act(ctx, "role:math,cmd:sum", map[string]any{"a": 1, "b": 2})
	if err != nil {
		panic(err)
	}
	var out struct{ R float64 }
	if err := res.Decode(&out); err != nil {
		panic(err)
	}
	fmt.Println(out.R)
	// Output: 3
}
