package harness

import (
	"context"
	"fmt"
	"net"
	"strings"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// The gRPC service is declared by hand (no protoc): one unary method on the
// example contract's AddRequest and AddResponse messages.
const grpcMethod = "/wizard.bench.v1.Bench/Add"

type grpcAdder interface {
	add(ctx context.Context, req *mathv1.AddRequest) (*mathv1.AddResponse, error)
}

var grpcServiceDesc = grpc.ServiceDesc{
	ServiceName: "wizard.bench.v1.Bench",
	HandlerType: (*grpcAdder)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Add",
		Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(mathv1.AddRequest)
			if err := dec(in); err != nil {
				return nil, err
			}
			s := srv.(grpcAdder)
			if ic == nil {
				return s.add(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: grpcMethod}
			return ic(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return s.add(ctx, req.(*mathv1.AddRequest))
			})
		},
	}},
	Metadata: "bench",
}

type grpcHandler Handler

func (h grpcHandler) add(ctx context.Context, req *mathv1.AddRequest) (*mathv1.AddResponse, error) {
	r, err := h(ctx, req.GetA(), req.GetB())
	if err != nil {
		return nil, err
	}
	return &mathv1.AddResponse{Sum: r}, nil
}

var grpcContender = Contender{
	Name:  gRPCName,
	Title: "gRPC-go",
	Note:  "google.golang.org/grpc defaults, one grpc.ClientConn (one HTTP/2 connection), insecure credentials on loopback, proto codec",
	Hops:  true,
	Serve: func(listen string, h Handler, _ ServeOptions) (Server, error) {
		l, err := net.Listen("tcp", listen)
		if err != nil {
			return nil, err
		}
		s := grpc.NewServer()
		s.RegisterService(&grpcServiceDesc, grpcHandler(h))
		go s.Serve(l)
		return &grpcServer{s: s, addr: l.Addr().String()}, nil
	},
	Dial: func(ctx context.Context, addr string, _ DialOptions) (Client, error) {
		cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		return grpcClient{cc}, nil
	},
	DialCluster: dialGRPCCluster,
	Balancer:    "round_robin, one ClientConn",
}

// grpcRoundRobin is the service config of the cluster scenario's client.
const grpcRoundRobin = `{"loadBalancingConfig":[{"round_robin":{}}]}`

// dialGRPCCluster makes one ClientConn over addrs with gRPC's round_robin
// balancer: a manual resolver hands it the addresses, round_robin opens a
// subchannel to each. It returns once every subchannel has answered a call,
// so that the balancer spreads the measured calls over all of them.
func dialGRPCCluster(ctx context.Context, addrs []string, _ DialOptions) (Client, error) {
	r := manual.NewBuilderWithScheme("bench")
	var state resolver.State
	for _, a := range addrs {
		state.Addresses = append(state.Addresses, resolver.Address{Addr: a})
	}
	r.InitialState(state)
	cc, err := grpc.NewClient(r.Scheme()+":///cluster",
		grpc.WithResolvers(r),
		grpc.WithDefaultServiceConfig(grpcRoundRobin),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	c := grpcClient{cc}
	if err := waitReady(ctx, c, len(addrs)); err != nil {
		cc.Close()
		return nil, fmt.Errorf("gRPC-go at %s: %w", strings.Join(addrs, ", "), err)
	}
	return c, nil
}

// waitReady calls c until the calls have reached n distinct servers
// (by their peer addresses), or ctx is done.
func waitReady(ctx context.Context, c grpcClient, n int) error {
	seen := map[string]bool{}
	for len(seen) < n {
		var p peer.Peer
		res := new(mathv1.AddResponse)
		if err := c.cc.Invoke(ctx, grpcMethod, &mathv1.AddRequest{A: 1, B: 2}, res, grpc.Peer(&p), grpc.WaitForReady(true)); err != nil {
			return fmt.Errorf("%d of %d subchannels ready: %w", len(seen), n, err)
		}
		if p.Addr != nil {
			seen[p.Addr.String()] = true
		}
	}
	return nil
}

type grpcServer struct {
	s    *grpc.Server
	addr string
}

func (s *grpcServer) Addr() string { return s.addr }

func (s *grpcServer) Close() error {
	s.s.GracefulStop()
	return nil
}

type grpcClient struct{ cc *grpc.ClientConn }

func (c grpcClient) Call(ctx context.Context, a, b float64) (float64, error) {
	res := new(mathv1.AddResponse)
	if err := c.cc.Invoke(ctx, grpcMethod, &mathv1.AddRequest{A: a, B: b}, res); err != nil {
		return 0, err
	}
	return res.GetSum(), nil
}

func (c grpcClient) Close() error { return c.cc.Close() }
