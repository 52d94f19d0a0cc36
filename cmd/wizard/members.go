package main

import (
	"cmp"
	"context"
	"text/tabwriter"
)

// membersCommand is 'wizard members', listed in [commands].
var membersCommand = &command{
	name: "members",
	summary: `List the nodes of the mesh as wizard's own node sees them: id, address,
transport, gossip segment, state (connected, suspect, not connected and why),
the number of patterns each serves, and the wizard version it runs (asked of
each node on introspect.DescribePattern). wizard itself is the first row.`,
	example: `wizard members --seeds 127.0.0.1:7946
WIZARD_SEEDS=10.0.0.5:7946 WIZARD_GOSSIP_KEY=$KEY wizard members --output json`,
	join: true,
	run:  runMembers,
}

// memberJSON is one member as --output json prints it.
type memberJSON struct {
	ID        string `json:"id"`
	Addr      string `json:"addr,omitempty"`
	Transport string `json:"transport"`
	Segment   string `json:"segment"`
	Self      bool   `json:"self,omitempty"`
	Connected bool   `json:"connected"`
	Suspect   bool   `json:"suspect"`
	Patterns  int    `json:"patterns"`
	Subs      int    `json:"subscriptions"`
	Version   string `json:"version,omitempty"`
	Digest    string `json:"digest,omitempty"`
	LastError string `json:"last_error,omitempty"`
}

func runMembers(ctx context.Context, c *cli, args []string, _ any) error {
	if err := wantArgs("members", args, 0, 0, ""); err != nil {
		return err
	}
	n, err := c.node(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *c.mesh.timeout)
	defer cancel()
	var out []memberJSON
	for _, m := range n.Members() {
		j := memberJSON{ID: m.ID, Addr: m.Addr, Transport: m.Transport, Segment: m.Segment, Self: m.Self,
			Connected: m.Connected, Suspect: m.Suspect, Patterns: m.Patterns, Subs: m.Subscriptions, Digest: m.Digest, LastError: m.LastError}
		if m.Self {
			j.Version = moduleVersion()
		} else if m.Connected {
			if s, err := n.DescribePeer(ctx, m.Addr); err == nil {
				j.Version = s.Version
			}
		}
		out = append(out, j)
	}
	if c.json {
		c.printJSON(out)
		return nil
	}
	w := tabwriter.NewWriter(c.io.out, 0, 4, 2, ' ', 0)
	defer w.Flush()
	w.Write([]byte("ID\tADDRESS\tTRANSPORT\tSEGMENT\tSTATE\tPATTERNS\tVERSION\n"))
	for _, m := range out {
		state := "connected"
		switch {
		case m.Self:
			state = "this wizard"
		case !m.Connected && m.LastError != "":
			state = "not connected: " + m.LastError
		case !m.Connected:
			state = "not connected"
		case m.Suspect:
			state = "connected, suspect"
		}
		c.fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", m.ID, cmp.Or(m.Addr, "-"), m.Transport, cmp.Or(m.Segment, "-"), state, m.Patterns, cmp.Or(m.Version, "-"))
	}
	return nil
}
