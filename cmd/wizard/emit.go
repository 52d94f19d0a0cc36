package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/wizardmesh/wizard/cmd/wizard/internal/jsonic"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// emitCommand is 'wizard emit', listed in [commands].
var emitCommand = &command{
	name: "emit",
	args: "PATTERN [DATA] | MESSAGE",
	summary: `Emit an event and print which groups took it.

The event goes to one member of every group with a subscription that
matches it (runtime.Node.Emit): every subscription whose pairs are all in
PATTERN and DATA's root keys, not only the best match as a call's handler
is chosen. With one MESSAGE, its root keys are the event's pairs, as act's
MESSAGE routes. DATA and MESSAGE are JSON objects or key:value pairs
(role:order,event:placed,id:7); DATA "-" reads the standard input.

emit waits up to --timeout for a subscription matching the event to be
known, then up to --timeout for the groups to take it, and prints those that
took it and those that missed it; --output json prints them as
{"took":[...],"missed":[...]}, with the error, if any, as "error". It exits
0 when every group took the event; 69 (not_found) when no subscription
matches it; else 64 plus the code of the first group that missed it, whose
reason the error names for each group (see 'wizard help').

--broadcast hands the event to every node with a matching subscription
(runtime.Node.Broadcast), each of which runs all of them whatever their
groups; took and missed then list node ids. --no-reply returns once the
event is handed over: took then names those it was handed to, not those
that ran it. Ctrl-C cancels the emit and exits 130.`,
	example: `wizard emit --seeds 127.0.0.1:7946 role:order,event:placed id:7,total:12.5
wizard emit --seeds 127.0.0.1:7946 --output json 'role:order,event:placed,id:7'
echo '{"id":7}' | wizard emit --peers 127.0.0.1:7070 --broadcast role:cache,cmd:flush -`,
	join:  true,
	flags: addEmitFlags,
	run:   runEmit,
}

type emitFlags struct {
	broadcast, noReply bool
	metadata           metadataFlag
}

func addEmitFlags(fs *flag.FlagSet) any {
	f := &emitFlags{}
	fs.BoolVar(&f.broadcast, "broadcast", false, "hand the event to every node with a matching subscription, not one member of each group")
	fs.BoolVar(&f.noReply, "no-reply", false, "return once the event is handed over, without waiting for the handlers")
	fs.Var(&f.metadata, "metadata", "event metadata key=value (repeatable)")
	return f
}

// event is an event read from the command line: Emit's pattern and
// message.
type event struct {
	pattern string
	msg     map[string]any
}

// parseEvent reads PATTERN [DATA] or one MESSAGE into an event; DATA "-"
// is read from stdin.
func parseEvent(args []string, stdin io.Reader) (*event, error) {
	switch len(args) {
	case 1:
		msg, err := jsonic.ParseObject(args[0])
		if err != nil {
			return nil, &inputError{"MESSAGE", err}
		}
		return &event{msg: msg}, nil
	case 2:
		p, err := pattern.Parse(args[0])
		if err != nil {
			return nil, &inputError{"PATTERN", err}
		}
		text := args[1]
		if text == "-" {
			b, err := io.ReadAll(stdin)
			if err != nil {
				return nil, fmt.Errorf("read DATA from the standard input: %w", err)
			}
			text = string(b)
		}
		data, err := jsonic.ParseObject(text)
		if err != nil {
			return nil, &inputError{"DATA", err}
		}
		return &event{pattern: p.String(), msg: data}, nil
	}
	return nil, usagef("want PATTERN [DATA] or one MESSAGE, not %d arguments", len(args))
}

// pairs is the event's pairs in canonical form, as the runtime matches
// subscriptions against them: the message's root scalar fields overlaid
// with the pattern's pairs.
func (ev *event) pairs(n *runtime.Node) (string, error) {
	m := maps.Clone(ev.msg)
	if ev.pattern != "" {
		p, err := pattern.Parse(ev.pattern)
		if err != nil {
			return "", &inputError{"PATTERN", err}
		}
		for _, pr := range p.Pairs() {
			m[pr.Key] = pr.Value
		}
	}
	x, err := n.ExplainMessage(m)
	if err != nil {
		return "", &inputError{"MESSAGE", err}
	}
	return x.Message.String(), nil
}

// waitForSubscriber waits, up to timeout, until a subscription matching
// ev is known; it returns an error only when ctx ends first (Ctrl-C). At
// the timeout it returns nil: the emit then reports that nothing matches.
func (ev *event) waitForSubscriber(ctx context.Context, n *runtime.Node, timeout time.Duration) error {
	pairs, err := ev.pairs(n)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err = n.WaitForSubscribers(wctx, pairs)
	if err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

// emit emits ev, as f says, within timeout.
func (ev *event) emit(ctx context.Context, n *runtime.Node, timeout time.Duration, f *emitFlags) (runtime.Delivery, error) {
	if len(f.metadata) > 0 {
		ctx = runtime.AppendMetadata(ctx, f.metadata...)
	}
	var opts []runtime.CallOption
	if f.noReply {
		opts = append(opts, runtime.NoReply())
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if f.broadcast {
		return n.Broadcast(ctx, ev.pattern, ev.msg, opts...)
	}
	return n.Emit(ctx, ev.pattern, ev.msg, opts...)
}

func runEmit(ctx context.Context, c *cli, args []string, own any) error {
	f := own.(*emitFlags)
	if err := wantArgs("emit", args, 1, 2, "PATTERN"); err != nil {
		return err
	}
	ev, err := parseEvent(args, c.io.in)
	if err != nil {
		return err
	}
	n, err := c.node(ctx)
	if err != nil {
		return err
	}
	if err := ev.waitForSubscriber(ctx, n, *c.mesh.timeout); err != nil {
		return err
	}
	d, err := ev.emit(ctx, n, *c.mesh.timeout, f)
	return c.printDelivery(d, err)
}

// deliveryJSON is a delivery as --output json prints it.
type deliveryJSON struct {
	Took   []string `json:"took"`
	Missed []string `json:"missed"`
	Error  any      `json:"error,omitempty"`
}

// printDelivery prints what an emit learnt, and returns err: as text,
// a line of those that took the event and one of those that missed it
// (none when no subscription matched), the error going to the standard
// error; as JSON, one object with both lists and the error.
func (c *cli) printDelivery(d runtime.Delivery, err error) error {
	if c.json {
		out := deliveryJSON{Took: orEmpty(d.Took), Missed: orEmpty(d.Missed)}
		if err != nil {
			out.Error = errorJSON(err).(map[string]any)["error"]
		}
		c.printJSON(out)
		if err != nil {
			return &reportedError{err}
		}
		return nil
	}
	c.printf("%s", deliveryText(d))
	return err
}

// deliveryText is a delivery as text: a line of those that took the
// event and one of those that missed it; nothing when no subscription
// matched.
func deliveryText(d runtime.Delivery) string {
	if len(d.Took)+len(d.Missed) == 0 {
		return ""
	}
	return fmt.Sprintf("took    %s\nmissed  %s\n", listOrDash(d.Took), listOrDash(d.Missed))
}

// orEmpty is s sorted, [] for none.
func orEmpty(s []string) []string {
	out := append([]string{}, s...)
	slices.Sort(out)
	return out
}

// listOrDash is s sorted and joined by commas, "-" for none.
func listOrDash(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(orEmpty(s), ", ")
}
