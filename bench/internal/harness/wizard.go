package harness

import (
	"context"
	"fmt"
	"strings"
	"time"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/pattern"
	"github.com/wizardmesh/wizard/runtime/quic"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// wizardPattern is the pattern the wizard contenders serve. The messages
// are the example contract's AddRequest{a, b} and AddResponse{sum}, the
// same protobuf messages gRPC-go carries.
const wizardPattern = "cmd:add,role:bench"

func newTCP() (runtime.Transport, error) {
	t, err := tcp.New()
	if err != nil {
		return nil, err
	}
	return t, nil
}

func newQUIC() (runtime.Transport, error) {
	t, err := quic.New(quic.WithInsecureSelfSigned())
	if err != nil {
		return nil, err
	}
	return t, nil
}

// wizardContender is a wizard node on the transport that newTransport
// returns: adding a transport to the comparison is one call to it.
func wizardContender(name, title, note string, newTransport func() (runtime.Transport, error)) Contender {
	return Contender{
		Name:  name,
		Title: title,
		Note:  note,
		Hops:  true,
		Serve: func(listen string, h Handler, _ ServeOptions) (Server, error) {
			t, err := newTransport()
			if err != nil {
				return nil, err
			}
			node, err := runtime.New(runtime.WithTransport(t), runtime.WithListen(listen))
			if err != nil {
				return nil, err
			}
			add := func(ctx context.Context, req *mathv1.AddRequest) (*mathv1.AddResponse, error) {
				r, err := h(ctx, req.GetA(), req.GetB())
				if err != nil {
					return nil, err
				}
				return &mathv1.AddResponse{Sum: r}, nil
			}
			if err := node.Add(wizardPattern, runtime.NewUnaryHandler(add)); err != nil {
				node.Close()
				return nil, err
			}
			return wizardServer{node}, nil
		},
		Dial: func(ctx context.Context, addr string, _ DialOptions) (Client, error) {
			return dialWizard(ctx, title, newTransport, []string{addr})
		},
		DialCluster: func(ctx context.Context, addrs []string, _ DialOptions) (Client, error) {
			return dialWizard(ctx, title, newTransport, addrs)
		},
		Balancer: "the node's default (latency-aware power of two choices), StaticPeers",
	}
}

// dialWizard makes a calling node that knows the servers at addrs
// (runtime.StaticPeers) and returns once every one of them serves
// wizardPattern over a live connection, so the balancer has them all from
// the first measured call.
func dialWizard(ctx context.Context, title string, newTransport func() (runtime.Transport, error), addrs []string) (Client, error) {
	node, err := dialWizardNode(ctx, title, newTransport, addrs, wizardPattern)
	if err != nil {
		return nil, err
	}
	add, err := runtime.NewClient[mathv1.AddRequest, mathv1.AddResponse](node, wizardPattern)
	if err != nil {
		node.Close()
		return nil, err
	}
	return &wizardClient{node: node, add: add}, nil
}

// dialWizardNode makes a calling node that knows the servers at addrs and
// returns once every one of them serves pat over a live connection.
func dialWizardNode(ctx context.Context, title string, newTransport func() (runtime.Transport, error), addrs []string, pat string) (*runtime.Node, error) {
	t, err := newTransport()
	if err != nil {
		return nil, err
	}
	node, err := runtime.New(runtime.WithTransport(t), runtime.WithDiscovery(runtime.StaticPeers(addrs...)))
	if err != nil {
		return nil, err
	}
	if err := waitTargets(ctx, node, pat, len(addrs)); err != nil {
		node.Close()
		return nil, fmt.Errorf("%s at %s: %w", title, strings.Join(addrs, ", "), err)
	}
	return node, nil
}

// waitTargets waits until n connected peers serve pat.
func waitTargets(ctx context.Context, node *runtime.Node, pat string, n int) error {
	if err := node.WaitFor(ctx, pat); err != nil {
		return err
	}
	want := pattern.MustParse(pat)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		routed, connected := 0, 0
		for _, p := range node.Patterns() {
			if p.Pattern.Equal(want) {
				routed = len(p.Remote)
			}
		}
		for _, m := range node.Members() {
			if !m.Self && m.Connected {
				connected++
			}
		}
		if routed >= n && connected >= n {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("%d of %d targets routed, %d connected: %w", routed, n, connected, ctx.Err())
		}
	}
}

type wizardServer struct{ node *runtime.Node }

func (s wizardServer) Addr() string { return s.node.Addr() }

func (s wizardServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.node.Shutdown(ctx)
}

type wizardClient struct {
	node *runtime.Node
	add  *runtime.Client[mathv1.AddRequest, mathv1.AddResponse]
}

func (c *wizardClient) Call(ctx context.Context, a, b float64) (float64, error) {
	res, err := c.add.Call(ctx, &mathv1.AddRequest{A: a, B: b})
	if err != nil {
		return 0, err
	}
	return res.GetSum(), nil
}

func (c *wizardClient) Close() error { return c.node.Close() }
