package main

import (
	"context"
	"text/tabwriter"

	"github.com/wizardmesh/wizard/runtime"
)

// healthCommand is 'wizard health', listed in [commands].
var healthCommand = &command{
	name: "health",
	args: "[PATTERN]",
	summary: `Ask nodes for their serving state on introspect.HealthPattern
(cmd:health,sys:wizard): serving, draining or not_serving, or the error that
kept the node from answering. Without PATTERN, every node of the mesh; with
it, the targets of the pattern that wins for it. The exit status is 1 when a
node asked is not serving.`,
	example: `wizard health --seeds 127.0.0.1:7946
wizard health --seeds 127.0.0.1:7946 role:math,cmd:sum`,
	join: true,
	run:  runHealth,
}

type healthJSON struct {
	ID     string `json:"id"`
	Addr   string `json:"addr"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

func runHealth(ctx context.Context, c *cli, args []string, _ any) error {
	if err := wantArgs("health", args, 0, 1, ""); err != nil {
		return err
	}
	n, err := c.node(ctx)
	if err != nil {
		return err
	}
	type target struct{ id, addr string }
	var targets []target
	if len(args) == 1 {
		x, err := explainArg(n, args[0])
		if err != nil {
			return err
		}
		if !x.Found {
			return x.Refused
		}
		for _, t := range x.Targets {
			targets = append(targets, target{t.ID, t.Addr})
		}
	} else {
		for _, m := range n.Members() {
			if !m.Self && m.Addr != "" && m.Transport == c.j.transport.Name() {
				targets = append(targets, target{m.ID, m.Addr})
			}
		}
	}
	var out []healthJSON
	bad := false
	for _, t := range targets {
		h := healthJSON{ID: t.id, Addr: t.addr}
		st, err := c.check(ctx, t.addr)
		h.Status = st.String()
		if err != nil {
			h.Error = errorText(err)
		}
		bad = bad || st != runtime.HealthServing
		out = append(out, h)
	}
	if c.json {
		c.printJSON(out)
	} else {
		w := tabwriter.NewWriter(c.io.out, 0, 4, 2, ' ', 0)
		w.Write([]byte("ID\tADDRESS\tSTATUS\n"))
		for _, h := range out {
			st := h.Status
			if h.Error != "" {
				st += ": " + h.Error
			}
			c.fprintf(w, "%s\t%s\t%s\n", h.ID, h.Addr, st)
		}
		w.Flush()
	}
	if bad {
		return errFailed
	}
	return nil
}

// check dials addr on wizard's transport and asks for its health.
func (c *cli) check(ctx context.Context, addr string) (runtime.Health, error) {
	ctx, cancel := context.WithTimeout(ctx, *c.mesh.timeout)
	defer cancel()
	conn, err := c.j.transport.Dial(ctx, addr)
	if err != nil {
		return runtime.HealthNotServing, err
	}
	defer conn.Close()
	return runtime.CheckHealth(ctx, conn)
}
