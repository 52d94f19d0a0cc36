package harness

import (
	"context"
	"errors"
	"fmt"
	"net"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	"google.golang.org/protobuf/proto"
	"storj.io/drpc"
	"storj.io/drpc/drpcconn"
	"storj.io/drpc/drpcmux"
	"storj.io/drpc/drpcpool"
	"storj.io/drpc/drpcserver"
)

// The drpc service is declared by hand (no protoc-gen-go-drpc): one unary
// method on the example contract's AddRequest and AddResponse, encoded
// with protobuf.
const drpcMethod = "/wizard.bench.v1.Bench/Add"

// drpcProto is drpc's encoding of the messages: protobuf.
type drpcProto struct{}

func (drpcProto) Marshal(m drpc.Message) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("drpc: %T is not a protobuf message", m)
	}
	return proto.Marshal(pm)
}

func (drpcProto) Unmarshal(b []byte, m drpc.Message) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("drpc: %T is not a protobuf message", m)
	}
	return proto.Unmarshal(b, pm)
}

// drpcDesc describes the one method to drpcmux.
type drpcDesc struct{}

func (drpcDesc) NumMethods() int { return 1 }

func (drpcDesc) Method(n int) (string, drpc.Encoding, drpc.Receiver, any, bool) {
	if n != 0 {
		return "", nil, nil, nil, false
	}
	recv := func(srv any, ctx context.Context, in1, _ any) (drpc.Message, error) {
		return srv.(grpcHandler).add(ctx, in1.(*mathv1.AddRequest))
	}
	return drpcMethod, drpcProto{}, recv, grpcHandler.add, true
}

// drpcContender is drpc as its users run concurrent calls: a drpcconn.Conn
// runs one call at a time, and drpc ships drpcpool for concurrency, a
// cache of connections from which each call takes one (dialling when none
// is idle) and to which it returns it.
var drpcContender = Contender{
	Name:  "drpc",
	Title: "drpc",
	Note: "storj.io/drpc: drpcmux + drpcserver, proto codec, the method declared by hand; the client is a drpcpool.Pool of drpcconn.Conns " +
		"(no capacity limits, no expiry): a drpc connection runs one call at a time, so each concurrent call takes a connection of its own " +
		"from the pool, which dials one when none is idle (https://pkg.go.dev/storj.io/drpc/drpcpool)",
	Serve: serveDRPC,
	Dial: func(ctx context.Context, addr string, _ DialOptions) (Client, error) {
		p := drpcpool.New[string, *drpcconn.Conn](drpcpool.Options{})
		dial := func(ctx context.Context, addr string) (*drpcconn.Conn, error) {
			var d net.Dialer
			nc, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			return drpcconn.New(nc), nil
		}
		return drpcPoolClient{p: p, c: p.Get(ctx, addr, dial)}, nil
	},
}

// drpcOneConnContender is the extra row: one drpcconn.Conn, so callers
// queue for it. It shows what a drpc client without its pool costs.
var drpcOneConnContender = Contender{
	Name:  "drpc-1conn",
	Title: "drpc, one connection (extra)",
	Extra: true,
	Note: "extra row: the same server, one drpcconn.Conn; drpc runs one call at a time on a connection (its manager's stream semaphore is 1), " +
		"so callers queue for it as HTTP/1.1's do on one connection: what not pooling costs",
	Serve: serveDRPC,
	Dial: func(ctx context.Context, addr string, _ DialOptions) (Client, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return drpcClient{drpcconn.New(nc)}, nil
	},
}

// serveDRPC serves the method with drpcmux and drpcserver.
func serveDRPC(listen string, h Handler, _ ServeOptions) (Server, error) {
	mux := drpcmux.New()
	if err := mux.Register(grpcHandler(h), drpcDesc{}); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &drpcServer{l: l, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- drpcserver.New(mux).Serve(ctx, l) }()
	return s, nil
}

type drpcServer struct {
	l      net.Listener
	cancel context.CancelFunc
	done   chan error
}

func (s *drpcServer) Addr() string { return s.l.Addr().String() }

func (s *drpcServer) Close() error {
	s.cancel()
	if err := <-s.done; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

type drpcClient struct{ c *drpcconn.Conn }

func (c drpcClient) Call(ctx context.Context, a, b float64) (float64, error) {
	res := new(mathv1.AddResponse)
	if err := c.c.Invoke(ctx, drpcMethod, drpcProto{}, &mathv1.AddRequest{A: a, B: b}, res); err != nil {
		return 0, err
	}
	return res.GetSum(), nil
}

func (c drpcClient) Close() error { return c.c.Close() }

// drpcPoolClient calls through a drpcpool connection.
type drpcPoolClient struct {
	p *drpcpool.Pool[string, *drpcconn.Conn]
	c drpcpool.Conn
}

func (c drpcPoolClient) Call(ctx context.Context, a, b float64) (float64, error) {
	res := new(mathv1.AddResponse)
	if err := c.c.Invoke(ctx, drpcMethod, drpcProto{}, &mathv1.AddRequest{A: a, B: b}, res); err != nil {
		return 0, err
	}
	return res.GetSum(), nil
}

func (c drpcPoolClient) Close() error {
	c.c.Close()
	return c.p.Close()
}
