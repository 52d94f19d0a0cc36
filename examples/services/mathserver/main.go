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
	"fmt"
	"os"

	"github.com/wizardmesh/wizard/examples/services/mathsvc"
	"github.com/wizardmesh/wizard/examples/services/mesh"
	"github.com/wizardmesh/wizard/runtime"
)

func main() {
	err := mesh.Serve("mathserver", "127.0.0.1:7070", func(n *runtime.Node) error { return mathsvc.Register(n) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "mathserver:", err)
		os.Exit(1)
	}
}
