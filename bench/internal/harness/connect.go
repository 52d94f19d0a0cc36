package harness

import (
	"context"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"
	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
)

// connectProcedure is the connect-go procedure, declared by hand (no
// protoc-gen-connect-go) on the example contract's messages.
const connectProcedure = "/wizard.bench.v1.Bench/Add"

// connectStreams is the server's limit of concurrent streams on a
// connection: above the most callers the comparison runs, so that they
// all share one connection (the client waits at the limit rather than
// opening another).
const connectStreams = 4096

var connectContender = Contender{
	Name:  "connect",
	Title: "connect-go",
	Note: "connectrpc.com/connect over h2c (net/http's unencrypted HTTP/2 on both sides), the Connect protocol with the proto codec; " +
		"one connection: the client's http.Transport waits at the server's stream limit (StrictMaxConcurrentRequests) rather than " +
		"opening another, and the server allows 4,096 streams",
	Serve: func(listen string, h Handler, _ ServeOptions) (Server, error) {
		add := func(ctx context.Context, req *connect.Request[mathv1.AddRequest]) (*connect.Response[mathv1.AddResponse], error) {
			r, err := h(ctx, req.Msg.GetA(), req.Msg.GetB())
			if err != nil {
				return nil, err
			}
			return connect.NewResponse(&mathv1.AddResponse{Sum: r}), nil
		}
		mux := http.NewServeMux()
		mux.Handle(connectProcedure, connect.NewUnaryHandler(connectProcedure, add))
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
	Dial: func(ctx context.Context, addr string, _ DialOptions) (Client, error) {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		t := &http.Transport{Protocols: &p, HTTP2: &http.HTTP2Config{StrictMaxConcurrentRequests: true}, DisableCompression: true}
		c := connect.NewClient[mathv1.AddRequest, mathv1.AddResponse](&http.Client{Transport: t}, "http://"+addr+connectProcedure)
		return &connectClient{c: c, t: t}, nil
	},
}

type connectClient struct {
	c *connect.Client[mathv1.AddRequest, mathv1.AddResponse]
	t *http.Transport
}

func (c *connectClient) Call(ctx context.Context, a, b float64) (float64, error) {
	res, err := c.c.CallUnary(ctx, connect.NewRequest(&mathv1.AddRequest{A: a, B: b}))
	if err != nil {
		return 0, err
	}
	return res.Msg.GetSum(), nil
}

func (c *connectClient) Close() error {
	c.t.CloseIdleConnections()
	return nil
}
