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

// connectCompressMinBytes is the size below which neither side
// compresses, as connect-go's docs advise (WithCompressMinBytes): its
// default compresses every answer with gzip, which for a 9-byte message
// costs far more CPU than it saves bytes.
const connectCompressMinBytes = 1024

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
		"opening another, and the server allows 4,096 streams; client and handler both take connect.WithCompressMinBytes(1024), so that the " +
		"9-byte answer is not gzipped as connect-go's default would (https://connectrpc.com/docs/go/serialization-and-compression/, " +
		"https://pkg.go.dev/connectrpc.com/connect#WithCompressMinBytes)",
	Serve: func(listen string, h Handler, _ ServeOptions) (Server, error) {
		return serveConnect(listen, h, connect.WithCompressMinBytes(connectCompressMinBytes))
	},
	Dial: func(ctx context.Context, addr string, _ DialOptions) (Client, error) {
		return dialConnect(addr, connect.WithCompressMinBytes(connectCompressMinBytes))
	},
}

// connectGzipContender is the extra row: connect-go's defaults, under
// which the handler gzips every answer the client accepts gzipped (the
// client asks for it by default); beside connect-go's row it shows what
// that costs on a 9-byte answer.
var connectGzipContender = Contender{
	Name:  "connect-gzip",
	Title: "connect-go, gzip on every answer (extra)",
	Extra: true,
	Note: "extra row: connect-go as above but with its default compression, which gzips every answer however small (the client asks " +
		"for gzipped answers by default): what leaving WithCompressMinBytes unset costs on a 9-byte answer",
	Serve: func(listen string, h Handler, _ ServeOptions) (Server, error) { return serveConnect(listen, h) },
	Dial:  func(ctx context.Context, addr string, _ DialOptions) (Client, error) { return dialConnect(addr) },
}

// serveConnect serves the procedure with connect-go on h2c, its handler
// built with opts.
func serveConnect(listen string, h Handler, opts ...connect.HandlerOption) (Server, error) {
	add := func(ctx context.Context, req *connect.Request[mathv1.AddRequest]) (*connect.Response[mathv1.AddResponse], error) {
		r, err := h(ctx, req.Msg.GetA(), req.Msg.GetB())
		if err != nil {
			return nil, err
		}
		return connect.NewResponse(&mathv1.AddResponse{Sum: r}), nil
	}
	mux := http.NewServeMux()
	mux.Handle(connectProcedure, connect.NewUnaryHandler(connectProcedure, add, opts...))
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
}

// dialConnect returns a connect-go client over one h2c connection, built
// with opts.
func dialConnect(addr string, opts ...connect.ClientOption) (Client, error) {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	t := &http.Transport{Protocols: &p, HTTP2: &http.HTTP2Config{StrictMaxConcurrentRequests: true}, DisableCompression: true}
	c := connect.NewClient[mathv1.AddRequest, mathv1.AddResponse](&http.Client{Transport: t}, "http://"+addr+connectProcedure, opts...)
	return &connectClient{c: c, t: t}, nil
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
