// Command gatewaydemo runs a small mesh behind the gateway: the math and
// users services of examples/services, each on its own node over TCP on
// 127.0.0.1, and a gateway (package gateway) in front of them with the
// routes of gateway.yaml, serving HTTP and WebSocket until interrupted.
// It prints a curl and a WebSocket command to try.
//
//	go run ./examples/services/gatewaydemo
//	go run ./examples/services/gatewaydemo -listen 127.0.0.1:9090
//
// The services' answers are protobuf messages; the gateway writes them as
// JSON because this binary links their generated types. The stock
// wizard-gateway links none: it learns them from the services' schemas
// (runtime.WithPeerTypes), so the same routes work in front of the
// services as processes:
//
//	go run ./examples/services/mathserver &
//	go run ./examples/services/usersserver -peers 127.0.0.1:7070 &
//	go run ./cmd/wizard-gateway -c examples/services/gatewaydemo/gateway.yaml \
//	    --peers 127.0.0.1:7070,127.0.0.1:7071
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	usersv1 "github.com/wizardmesh/wizard/examples/gen/users/v1"
	"github.com/wizardmesh/wizard/examples/services/mathsvc"
	"github.com/wizardmesh/wizard/examples/services/userssvc"
	"github.com/wizardmesh/wizard/gateway"
	"github.com/wizardmesh/wizard/gateway/config"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// routes is gateway.yaml, the demo's configuration unless -config names
// another.
//
//go:embed gateway.yaml
var routes []byte

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "gatewaydemo:", err)
		os.Exit(1)
	}
}

// run is the demo: it serves until ctx ends. serving, if not nil, is
// told the gateway's address once it serves.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, serving func(addr string)) error {
	fs := flag.NewFlagSet("gatewaydemo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "", "the gateway's HTTP address (default: server.listen of the configuration, 127.0.0.1:8080)")
	file := fs.String("config", "", "a gateway configuration file instead of the demo's gateway.yaml")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := loadConfig(*file)
	if err != nil {
		return err
	}
	addr := cfg.Server.Listen
	if *listen != "" {
		addr = *listen
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// The mesh is up when every node sees what it calls: the gateway's
	// node both services, and the users node math, which GetUser calls
	// (a static peer that is known but not connected yet answers
	// unavailable, a 503 through the gateway).
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	math, err := newNode(log, "math")
	if err != nil {
		return err
	}
	defer math.Close()
	if err := mathsvc.Register(math); err != nil {
		return err
	}
	users, err := newNode(log, "users", runtime.WithDiscovery(runtime.StaticPeers(math.Addr())))
	if err != nil {
		return err
	}
	defer users.Close()
	if err := registerUsers(ctx, users); err != nil {
		return err
	}
	gw, err := newNode(log, "gateway", runtime.WithDiscovery(runtime.StaticPeers(math.Addr(), users.Addr())))
	if err != nil {
		return err
	}
	defer gw.Close()
	for _, w := range []struct {
		name string
		n    *runtime.Node
		p    string
	}{
		{"users", users, mathv1.MathServiceSumPattern},
		{"the gateway's", gw, mathv1.MathServiceSumPattern},
		{"the gateway's", gw, usersv1.UsersServiceGetUserPattern},
	} {
		if err := w.n.WaitFor(wait, w.p); err != nil {
			return fmt.Errorf("%s node does not see %s: %w", w.name, w.p, err)
		}
	}

	g, err := gateway.New(gw, cfg, gateway.WithLogger(log))
	if err != nil {
		return err
	}
	defer g.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- g.Serve(ln) }()
	printTry(stdout, ln.Addr().String(), math.Addr(), users.Addr())
	if serving != nil {
		serving(ln.Addr().String())
	}
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancelShutdown := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelShutdown()
	err = g.Shutdown(shutdown)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

func loadConfig(file string) (*config.Config, error) {
	if file != "" {
		return config.Load(file)
	}
	return config.Parse("gateway.yaml", routes)
}

// newNode starts the node of role (math, users or gateway) over TCP on
// 127.0.0.1.
func newNode(log *slog.Logger, role string, opts ...runtime.Option) (*runtime.Node, error) {
	t, err := tcp.New(tcp.WithLogger(log))
	if err != nil {
		return nil, err
	}
	var tr runtime.Transport = t
	if wrapTransport != nil {
		tr = wrapTransport(role, tr)
	}
	return runtime.New(append([]runtime.Option{runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"), runtime.WithLogger(log)}, opts...)...)
}

// wrapTransport, when a test sets it, wraps the transport of each node.
var wrapTransport func(role string, t runtime.Transport) runtime.Transport

// registerUsers adds the users service to n, with a first user, ada,
// whose points the math service totals.
func registerUsers(ctx context.Context, n *runtime.Node) error {
	math, err := mathv1.NewMathServiceClient(n)
	if err != nil {
		return err
	}
	svc := userssvc.New(math)
	if err := svc.Register(n); err != nil {
		return err
	}
	_, err = svc.PutUser(ctx, &usersv1.PutUserRequest{User: &usersv1.User{Id: "ada", Name: "Ada Lovelace", Points: []float64{3, 4.5}}})
	return err
}

// printTry prints what the demo serves and the commands to try.
func printTry(w io.Writer, addr, math, users string) {
	base := "http://" + addr
	fmt.Fprintf(w, "gatewaydemo: math on tcp %s, users on tcp %s, gateway on %s\n", math, users, base)
	fmt.Fprintf(w, "try:\n")
	fmt.Fprintf(w, "  curl -s -X POST %s/api/math/sum -H 'Content-Type: application/json' -d '{\"values\":[1,2,3.5]}'\n", base)
	fmt.Fprintf(w, "  curl -s %s/api/users/ada\n", base)
	fmt.Fprintf(w, "  npx -y wscat -c ws://%s/ws -x '{\"type\":\"req\",\"id\":\"1\",\"method\":\"POST\",\"path\":\"/api/math/sum\",\"body\":{\"values\":[1,2]}}' -w 1\n", addr)
	fmt.Fprintf(w, "Ctrl-C stops.\n")
}
