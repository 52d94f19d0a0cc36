package main

import (
	"context"
	"errors"
	"flag"
)

// actCommand is 'wizard act', listed in [commands].
var actCommand = &command{
	name: "act",
	args: "PATTERN [DATA] | MESSAGE",
	summary: `Call a pattern and print the answer as JSON.

With PATTERN and DATA, PATTERN routes (plus the --mixin keys of DATA) and the
handler receives DATA alone, as runtime.Node.ActE sends it. With one MESSAGE,
every root key routes and the handler receives the message, as Seneca's act
(runtime.Node.Act). DATA and MESSAGE are JSON or key:value pairs
(role:math,cmd:sum,a:1, nested {} and []); DATA "-" reads the standard input.
A typed pattern's DATA is its request as protobuf JSON. An error prints with
its code, and the exit status is 64 plus the code's number (67
invalid_argument, 69 not_found, 78 unavailable: see 'wizard help'); Ctrl-C
cancels the call and exits 130.`,
	example: `wizard act --seeds 127.0.0.1:7946 role:math,cmd:sum 'values:[1,2,3.5]'
wizard act --peers 127.0.0.1:7070 'role:greet,name:ada'
echo '{"values":[2,3]}' | wizard act --peers 127.0.0.1:7070 cmd:product,role:math -`,
	join:  true,
	flags: addCallFlags,
	run:   runAct,
}

func addCallFlags(fs *flag.FlagSet) any {
	f := &callFlags{}
	fs.StringVar(&f.mixin, "mixin", "", "comma-separated keys of DATA that route too")
	fs.BoolVar(&f.noReply, "no-reply", false, "send without waiting for an answer")
	fs.Var(&f.metadata, "metadata", "call metadata key=value (repeatable)")
	return f
}

func runAct(ctx context.Context, c *cli, args []string, own any) error {
	if err := wantArgs("act", args, 1, 2, "PATTERN"); err != nil {
		return err
	}
	n, err := c.node(ctx)
	if err != nil {
		return err
	}
	cl, err := prepare(ctx, n, args, c.io.in, own.(*callFlags))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *c.mesh.timeout)
	defer cancel()
	res, err := cl.send(ctx, n)
	if err != nil && context.Cause(ctx) != nil && !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		cl.deliverCancel(n) // interrupted: the handler's ctx ends now, not at the deadline
	}
	if err != nil {
		return err
	}
	if own.(*callFlags).noReply {
		return nil
	}
	b, err := answerJSON(res, cl.method)
	if err != nil {
		return err
	}
	c.io.out.Write(append(b, '\n'))
	return nil
}
