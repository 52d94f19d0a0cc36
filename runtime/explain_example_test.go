package runtime_test

import (
	"context"
	"fmt"

	"github.com/wizardmesh/wizard/runtime"
)

// Explain says which added pattern answers a message and why the others
// that match lose.
func ExampleNode_Explain() {
	node, _ := runtime.New()
	defer node.Close()
	h := func(context.Context, runtime.Request) (any, error) { return nil, nil }
	for _, p := range []string{"role:x,cmd:*", "role:x,cmd:get", "role:x"} {
		_ = node.Add(p, h)
	}
	x, _ := node.Explain("role:x,cmd:get")
	for _, c := range x.Candidates {
		if c.Rank == 1 {
			fmt.Printf("%d. %s wins\n", c.Rank, c.Pattern)
			continue
		}
		fmt.Printf("%d. %s loses (%s): %s\n", c.Rank, c.Pattern, c.Rule, c.Reason)
	}
	// Output:
	// 1. cmd:get,role:x wins
	// 2. cmd:*,role:x loses (exact-before-glob): exact before glob: at key cmd the message's value get is a pattern value, tried before the glob *
	// 3. role:x loses (deeper): deeper wins: "cmd:get,role:x" matches all of it and also cmd:get
}
