package harness

import (
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// connectStreamProcedure is the connect-go server-streaming procedure,
// declared by hand like the unary one, on the gRPC contender's messages.
const connectStreamProcedure = "/wizard.bench.v1.Stream/Messages"

// connectNoCompression turns compression off on both sides: connect-go
// otherwise gzips every message when the caller accepts it, which its
// users turn off for small messages.
var connectNoCompression = connect.WithCompressMinBytes(math.MaxInt)

var connectStreamer = streamer{
	name:  "connect",
	title: "connect-go",
	note: "connect.NewServerStreamHandler over h2c (net/http's unencrypted HTTP/2 on both sides, its default windows), the Connect protocol, " +
		"proto codec, compression off (WithCompressMinBytes(math.MaxInt) on both sides); one connection (StrictMaxConcurrentRequests)",
	serve: func(listen string, src *streamSource) (Server, error) {
		h := func(ctx context.Context, req *connect.Request[wrapperspb.UInt64Value], s *connect.ServerStream[wrapperspb.BytesValue]) error {
			return serveMessages(src, ctx, int(req.Msg.GetValue()), s, func(s *connect.ServerStream[wrapperspb.BytesValue], p []byte) error {
				return s.Send(&wrapperspb.BytesValue{Value: p})
			})
		}
		mux := http.NewServeMux()
		mux.Handle(connectStreamProcedure, connect.NewServerStreamHandler(connectStreamProcedure, h, connectNoCompression))
		l, err := net.Listen("tcp", listen)
		if err != nil {
			return nil, err
		}
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		s := &http.Server{Handler: mux, Protocols: &p, ReadHeaderTimeout: 10 * time.Second,
			HTTP2: &http.HTTP2Config{MaxConcurrentStreams: connectStreams}}
		go s.Serve(l)
		return &httpServer{s: s, addr: l.Addr().String()}, nil
	},
	dial: func(_ context.Context, addr string) (StreamClient, error) {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		t := &http.Transport{Protocols: &p, HTTP2: &http.HTTP2Config{StrictMaxConcurrentRequests: true}, DisableCompression: true}
		c := connect.NewClient[wrapperspb.UInt64Value, wrapperspb.BytesValue](&http.Client{Transport: t}, "http://"+addr+connectStreamProcedure, connectNoCompression)
		return &connectStreamClient{c: c, t: t}, nil
	},
}

type connectStreamClient struct {
	c *connect.Client[wrapperspb.UInt64Value, wrapperspb.BytesValue]
	t *http.Transport
}

func (c *connectStreamClient) Start(ctx context.Context, n, size int, got func(int, []byte) error) (StreamRun, error) {
	return startEach(ctx, n, size, got, func(ctx context.Context, size int) (recvStream, error) {
		ctx, cancel := context.WithCancel(ctx)
		s, err := c.c.CallServerStream(ctx, connect.NewRequest(&wrapperspb.UInt64Value{Value: uint64(size)}))
		if err != nil {
			cancel()
			return nil, err
		}
		return &connectRecv{s: s, cancel: cancel}, nil
	})
}

func (c *connectStreamClient) Close() error {
	c.t.CloseIdleConnections()
	return nil
}

type connectRecv struct {
	s      *connect.ServerStreamForClient[wrapperspb.BytesValue]
	cancel context.CancelFunc
}

func (r *connectRecv) Recv() ([]byte, error) {
	if !r.s.Receive() {
		if err := r.s.Err(); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	return r.s.Msg().GetValue(), nil
}

func (r *connectRecv) Close() {
	r.cancel()
	r.s.Close()
}
