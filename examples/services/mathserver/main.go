// Command mathserver serves the math service to other processes.
//
//	go run ./examples/services/mathserver -listen 127.0.0.1:7070
//	go run ./examples/services/mathcaller -peers 127.0.0.1:7070
//
// or in a gossip mesh, joined through a seed (see usersserver):
//
//	go run ./examples/services/mathserver -listen 127.0.0.1:0 -gossip 127.0.0.1:0 -seeds 127.0.0.1:7946
//
// It prints the address it listens on, serves until interrupted, then shuts
// down gracefully (goaway, drain).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/wizardmesh/wizard/examples/services/mathsvc"
	"github.com/wizardmesh/wizard/examples/services/mesh"
	"github.com/wizardmesh/wizard/examples/services/transport"
	"github.com/wizardmesh/wizard/runtime"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:7070", "address to serve on (port 0 picks one)")
	kind := flag.String("transport", "tcp", "transport: "+transport.Names)
	discovery := mesh.AddFlags(flag.CommandLine, "")
	flag.Parse()
	if err := run(*listen, *kind, discovery); err != nil {
		fmt.Fprintln(os.Stderr, "mathserver:", err)
		os.Exit(1)
	}
}

func run(listen, kind string, discovery *mesh.Flags) error {
	t, err := transport.New(kind)
	if err != nil {
		return err
	}
	opts := []runtime.Option{runtime.WithTransport(t), runtime.WithListen(listen)}
	if o, err := discovery.Option(); err != nil {
		return err
	} else if o != nil {
		opts = append(opts, o)
	}
	node, err := runtime.New(opts...)
	if err != nil {
		return err
	}
	if err := mathsvc.Register(node); err != nil {
		node.Close()
		return err
	}
	fmt.Printf("mathserver: serving %d patterns on %s %s%s\n", len(node.Patterns()), kind, node.Addr(), discovery.Describe())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return node.Shutdown(shutdown)
}
