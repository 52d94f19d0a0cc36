package gwbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	wizard "github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// envChild names the environment variable that turns the running binary
// into one of the benchmark's server processes: it holds a JSON childSpec.
const envChild = "WIZARD_GWBENCH_CHILD"

// echoPattern is the wizard echo service's pattern.
const echoPattern = "role:bench,cmd:echo"

// The roles of a child process.
const (
	roleEcho        = "wizard-echo"  // a wizard node over TCP serving echoPattern
	roleGRPCEcho    = "grpc-echo"    // a gRPC server with the Echo method
	roleGRPCGateway = "grpc-gateway" // grpc-gateway's ServeMux in front of Upstream
)

type childSpec struct {
	Role     string `json:"role"`
	Listen   string `json:"listen"`
	Upstream string `json:"upstream,omitempty"`
	Config   string `json:"config,omitempty"` // roleProfGateway's YAML file
	Dir      string `json:"dir,omitempty"`    // roleProfGateway's and roleGRPCGateway's profile directory (cpu.pprof)
}

// ServeIfChild serves and exits when the process was started as one of
// the benchmark's server processes; otherwise it returns at once. Call it
// first in main and in TestMain. A child listens on 127.0.0.1, prints its
// address on stdout and serves until its stdin ends.
func ServeIfChild() {
	js := os.Getenv(envChild)
	if js == "" {
		return
	}
	var s childSpec
	err := json.Unmarshal([]byte(js), &s)
	if err == nil {
		err = serveChild(s, os.Stdin, os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gwbench child %s: %v\n", js, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func serveChild(s childSpec, in io.Reader, out io.Writer) error {
	var addr string
	var closer func()
	switch s.Role {
	case roleProfGateway:
		return serveProfGateway(s, in, out)
	case roleEmitter:
		return serveEmitter(s, in, out)
	case roleStreamer:
		return serveStreamer(s, in, out)
	case roleEcho:
		t, err := tcp.New()
		if err != nil {
			return err
		}
		node, err := wizard.New(wizard.WithTransport(t), wizard.WithListen(s.Listen), wizard.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			return err
		}
		if err := node.Add(echoPattern, func(_ context.Context, req wizard.Request) (any, error) { return req.Msg(), nil }); err != nil {
			node.Close()
			return err
		}
		addr = node.Addr()
		closer = func() { node.Close() }
	case roleGRPCEcho:
		l, err := net.Listen("tcp", s.Listen)
		if err != nil {
			return err
		}
		srv := grpc.NewServer()
		srv.RegisterService(&echoServiceDesc, echoServer{})
		go srv.Serve(l)
		addr = l.Addr().String()
		closer = srv.Stop
	case roleGRPCGateway:
		if s.Dir != "" {
			// Profiled beside wizard-gateway: the CPU profile over the
			// process's life, written when stdin ends (the parent's
			// SIGINT that follows is ignored so that it can be).
			signal.Ignore(os.Interrupt)
			stop, err := startCPUProfile(s.Dir)
			if err != nil {
				return err
			}
			defer stop()
		}
		h, conn, err := newGRPCGateway(s.Upstream)
		if err != nil {
			return err
		}
		l, err := net.Listen("tcp", s.Listen)
		if err != nil {
			conn.Close()
			return err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute}
		go srv.Serve(l)
		addr = l.Addr().String()
		closer = func() { srv.Close(); conn.Close() }
	default:
		return fmt.Errorf("unknown role %q", s.Role)
	}
	defer closer()
	if _, err := fmt.Fprintln(out, addr); err != nil {
		return err
	}
	io.Copy(io.Discard, in)
	return nil
}

// The gRPC echo service, declared by hand (no protoc): one unary method
// whose request and response are google.protobuf.Struct, the same dynamic
// JSON object the other contenders carry.
const echoMethod = "/wizard.bench.v1.Echo/Echo"

type echoer interface {
	echo(ctx context.Context, in *structpb.Struct) (*structpb.Struct, error)
}

type echoServer struct{}

func (echoServer) echo(_ context.Context, in *structpb.Struct) (*structpb.Struct, error) {
	return in, nil
}

var echoServiceDesc = grpc.ServiceDesc{
	ServiceName: "wizard.bench.v1.Echo",
	HandlerType: (*echoer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(structpb.Struct)
			if err := dec(in); err != nil {
				return nil, err
			}
			s := srv.(echoer)
			if ic == nil {
				return s.echo(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: echoMethod}
			return ic(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return s.echo(ctx, req.(*structpb.Struct))
			})
		},
	}},
	Metadata: "bench",
}

// newGRPCGateway is grpc-gateway's ServeMux with POST /echo mapped to the
// Echo method of the gRPC server at upstream, as a generated
// RegisterEchoHandler would map `option (google.api.http) = {post:
// "/echo" body: "*"}`: the request annotated into gRPC metadata, the body
// decoded by the mux's marshaler (protojson), the call made over one
// client connection, the answer forwarded as JSON.
func newGRPCGateway(upstream string) (http.Handler, *grpc.ClientConn, error) {
	conn, err := grpc.NewClient(upstream, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	mux := runtime.NewServeMux(runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{
		MarshalOptions:   protojson.MarshalOptions{EmitUnpopulated: false},
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true},
	}))
	err = mux.HandlePath(http.MethodPost, "/echo", func(w http.ResponseWriter, r *http.Request, _ map[string]string) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		inbound, outbound := runtime.MarshalerForRequest(mux, r)
		ctx, err := runtime.AnnotateContext(ctx, mux, r, echoMethod, runtime.WithHTTPPathPattern("/echo"))
		if err != nil {
			runtime.HTTPError(ctx, mux, outbound, w, r, err)
			return
		}
		in := new(structpb.Struct)
		if err := inbound.NewDecoder(r.Body).Decode(in); err != nil && err != io.EOF {
			runtime.HTTPError(ctx, mux, outbound, w, r, err)
			return
		}
		var md runtime.ServerMetadata
		out := new(structpb.Struct)
		err = conn.Invoke(ctx, echoMethod, in, out, grpc.Header(&md.HeaderMD), grpc.Trailer(&md.TrailerMD))
		ctx = runtime.NewServerMetadataContext(ctx, md)
		if err != nil {
			runtime.HTTPError(ctx, mux, outbound, w, r, err)
			return
		}
		runtime.ForwardResponseMessage(ctx, mux, outbound, w, r, out)
	})
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return mux, conn, nil
}
