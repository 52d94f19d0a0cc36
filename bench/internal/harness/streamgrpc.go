package harness

import (
	"context"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The gRPC-go streaming service, declared by hand like the unary one: the
// request is a google.protobuf.UInt64Value (the message size), each
// message a google.protobuf.BytesValue.
const grpcStreamMethod = "/wizard.bench.v1.Stream/Messages"

func grpcStreamDesc(src *streamSource) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "wizard.bench.v1.Stream",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{
			StreamName:    "Messages",
			ServerStreams: true,
			Handler: func(_ any, ss grpc.ServerStream) error {
				req := new(wrapperspb.UInt64Value)
				if err := ss.RecvMsg(req); err != nil {
					return err
				}
				// A new message per send, as generated code builds them;
				// SendMsg has encoded it when it returns.
				return serveMessages(src, ss.Context(), int(req.GetValue()), ss, func(ss grpc.ServerStream, p []byte) error {
					return ss.SendMsg(&wrapperspb.BytesValue{Value: p})
				})
			},
		}},
		Metadata: "bench",
	}
}

var grpcStreamer = streamer{
	name:  gRPCName,
	title: "gRPC-go",
	note: "a server-streaming method (google.protobuf.BytesValue messages) on grpc.NewServer() with its defaults: the 64 KiB initial windows, " +
		"grown by its BDP estimator; one grpc.ClientConn, insecure credentials on loopback; the caller receives as generated code does, " +
		"a new message per RecvMsg",
	idle: true,
	serve: func(listen string, src *streamSource) (Server, error) {
		l, err := net.Listen("tcp", listen)
		if err != nil {
			return nil, err
		}
		s := grpc.NewServer()
		s.RegisterService(grpcStreamDesc(src), struct{}{})
		go s.Serve(l)
		return &grpcServer{s: s, addr: l.Addr().String()}, nil
	},
	dial: func(ctx context.Context, addr string) (StreamClient, error) {
		cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		return grpcStreamClient{cc}, nil
	},
}

type grpcStreamClient struct{ cc *grpc.ClientConn }

var grpcServerStream = grpc.StreamDesc{StreamName: "Messages", ServerStreams: true}

func (c grpcStreamClient) Start(ctx context.Context, n, size int, got func(int, []byte) error) (StreamRun, error) {
	return startEach(ctx, n, size, got, func(ctx context.Context, size int) (recvStream, error) {
		ctx, cancel := context.WithCancel(ctx)
		cs, err := c.cc.NewStream(ctx, &grpcServerStream, grpcStreamMethod)
		if err == nil {
			err = cs.SendMsg(&wrapperspb.UInt64Value{Value: uint64(size)})
		}
		if err == nil {
			err = cs.CloseSend()
		}
		if err != nil {
			cancel()
			return nil, err
		}
		return &grpcRecv{cs: cs, cancel: cancel}, nil
	})
}

func (c grpcStreamClient) Close() error { return c.cc.Close() }

type grpcRecv struct {
	cs     grpc.ClientStream
	cancel context.CancelFunc
}

func (r *grpcRecv) Recv() ([]byte, error) {
	m := new(wrapperspb.BytesValue)
	if err := r.cs.RecvMsg(m); err != nil {
		return nil, err
	}
	return m.GetValue(), nil
}

func (r *grpcRecv) Close() { r.cancel() }
