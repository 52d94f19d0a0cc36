package swim_test

import (
	"context"
	"fmt"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/swim"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// Two nodes find each other by gossip: the caller knows only the gossip
// address of the math node, not where its handlers listen.
func Example() {
	tr, err := tcp.New() // one transport serves both nodes
	if err != nil {
		panic(err)
	}
	gossip, err := swim.New(swim.WithBindAddr("127.0.0.1:0"), swim.WithPreset(swim.Fast))
	if err != nil {
		panic(err)
	}
	math, err := runtime.New(runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"), runtime.WithDiscovery(gossip))
	if err != nil {
		panic(err)
	}
	defer math.Close()
	_ = math.Add("role:math,cmd:sum", func(ctx context.Context, r runtime.Request) (any, error) {
		var in struct{ A, B int }
		if err := r.Decode(&in); err != nil {
			return nil, err
		}
		return map[string]any{"sum": in.A + in.B}, nil
	})

	seeded, err := swim.New(
		swim.WithBindAddr("127.0.0.1:0"),
		swim.WithPreset(swim.Fast),
		swim.WithSeeds(gossip.GossipAddr()),
	)
	if err != nil {
		panic(err)
	}
	caller, err := runtime.New(runtime.WithTransport(tr), runtime.WithDiscovery(seeded))
	if err != nil {
		panic(err)
	}
	defer caller.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := caller.WaitFor(ctx, "role:math,cmd:sum"); err != nil {
		panic(err)
	}
	res, err := caller.Act(ctx, "role:math,cmd:sum", map[string]any{"a": 20, "b": 22})
	fmt.Println(res.Value(), err)
	// Output: map[sum:42] <nil>
}
