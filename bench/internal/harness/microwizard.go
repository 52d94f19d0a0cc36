package harness

import (
	"context"
	"fmt"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/microwizard"
)

// mwPattern is the pattern the MicroWizard contenders serve and call: an
// actE of {a, b} answered {r}, JSON on MicroWizard's TCP wire.
const mwPattern = "role:bench,cmd:add"

// mwDir is the bench module's folder with MicroWizard 1.5.0 (package.json,
// its lock and bench.mjs).
const mwDir = "microwizard"

type mwArgs struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type mwReply struct {
	R float64 `json:"r"`
}

func prepareMicroWizard(ctx context.Context) string { return prepareNode(ctx, mwDir) }

// serveMicroWizard starts bench.mjs serve: MicroWizard's own node answers
// in Node.js (h is not used: the handler is the script's a + b).
func serveMicroWizard(listen string, _ Handler, _ ServeOptions) (Server, error) {
	return startNodeServer(mwDir, nil, "bench.mjs", "serve")
}

// dialMicroWizardDriver starts bench.mjs load: a MicroWizard client in its
// own Node.js process that drives the server at addr with actE.
func dialMicroWizardDriver(ctx context.Context, addr string) (Driver, error) {
	return startNodeDriver(ctx, mwDir, nil, "bench.mjs", "load", addr)
}

var microwizardGoContender = Contender{
	Name:  "microwizard",
	Title: "MicroWizard TCP ← Go (runtime/microwizard)",
	Note: "MicroWizard 1.5.0 (npm, bench/microwizard, Node.js) serving over its TCP transport, listen({type: 'tcp'}), actE with the " +
		"string pattern " + mwPattern + " answering {r}; called by the Go load generator through a wizard node on runtime/microwizard " +
		"(MicroWizard's TCP wire: newline-delimited JSON, one connection), n.ActE with {a, b}: the Go caller → MicroWizard server bridge figure",
	Prepare: prepareMicroWizard,
	Serve:   serveMicroWizard,
	Dial: func(ctx context.Context, addr string, _ DialOptions) (Client, error) {
		tr, err := microwizard.New(microwizard.WithPeer(addr, mwPattern))
		if err != nil {
			return nil, err
		}
		node, err := runtime.New(runtime.WithTransport(tr), runtime.WithDiscovery(tr.Discovery()))
		if err != nil {
			return nil, err
		}
		if err := node.WaitFor(ctx, mwPattern); err != nil {
			node.Close()
			return nil, fmt.Errorf("MicroWizard at %s: %w", addr, err)
		}
		return mwClient{node}, nil
	},
}

var microwizardNodeContender = Contender{
	Name:  "microwizard-node",
	Title: "MicroWizard TCP ← MicroWizard (Node.js)",
	Note: "the same MicroWizard server, driven by a MicroWizard 1.5.0 client({type: 'tcp', host, port, pin}) in its own Node.js process " +
		"(bench.mjs load, one process for all the runs, connected once: that many concurrent loops of actE, each awaiting its answer; it times the calls itself with process.hrtime " +
		"and reports them as the harness does): the figure MicroWizard's users compare",
	Prepare:    prepareMicroWizard,
	Serve:      serveMicroWizard,
	DialDriver: dialMicroWizardDriver,
}

var microwizardBridgeContender = Contender{
	Name:  "wizard-microwizard",
	Title: "wizard (runtime/microwizard) ← MicroWizard (Node.js)",
	Note: "a wizard node serving " + mwPattern + " on runtime/microwizard (it speaks MicroWizard's TCP wire), a JSON handler; driven by " +
		"the MicroWizard client process of the row above: the MicroWizard caller → Go server bridge figure",
	Prepare: prepareMicroWizard,
	Serve: func(listen string, h Handler, _ ServeOptions) (Server, error) {
		tr, err := microwizard.New()
		if err != nil {
			return nil, err
		}
		node, err := runtime.New(runtime.WithTransport(tr), runtime.WithListen(listen))
		if err != nil {
			return nil, err
		}
		add := func(ctx context.Context, req runtime.Request) (any, error) {
			var in mwArgs
			if err := req.Decode(&in); err != nil {
				return nil, err
			}
			r, err := h(ctx, in.A, in.B)
			if err != nil {
				return nil, err
			}
			return mwReply{R: r}, nil
		}
		if err := node.Add(mwPattern, add); err != nil {
			node.Close()
			return nil, err
		}
		return wizardServer{node}, nil
	},
	DialDriver: dialMicroWizardDriver,
}

type mwClient struct{ node *runtime.Node }

func (c mwClient) Call(ctx context.Context, a, b float64) (float64, error) {
	res, err := c.node.ActE(ctx, mwPattern, map[string]any{"a": a, "b": b})
	if err != nil {
		return 0, err
	}
	var out mwReply
	if err := res.Decode(&out); err != nil {
		return 0, err
	}
	return out.R, nil
}

func (c mwClient) Close() error { return c.node.Close() }
