// Command usersserver serves the users service, which calls the math
// service wherever the mesh has it. It is the seed of the example mesh:
//
//	go run ./examples/services/usersserver -listen 127.0.0.1:0 -gossip 127.0.0.1:7946
//	go run ./examples/services/mathserver -listen 127.0.0.1:0 -gossip 127.0.0.1:0 -seeds 127.0.0.1:7946
//	go run ./examples/services/mathcaller -gossip 127.0.0.1:0 -seeds 127.0.0.1:7946
//
// It prints its addresses, serves until interrupted, then shuts down
// gracefully and leaves the mesh.
package main

import (
	"fmt"
	"os"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	"github.com/wizardmesh/wizard/examples/services/mesh"
	"github.com/wizardmesh/wizard/examples/services/userssvc"
	"github.com/wizardmesh/wizard/runtime"
)

func main() {
	err := mesh.Serve("usersserver", "127.0.0.1:7071", func(n *runtime.Node) error {
		math, err := mathv1.NewMathServiceClient(n)
		if err != nil {
			return err
		}
		return userssvc.New(math).Register(n)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "usersserver:", err)
		os.Exit(1)
	}
}
