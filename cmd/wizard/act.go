package main

import (
	"context"
	"errors"
	"flag"
)

// actCommand is 'wizard act', listed in [commands].
var actCommand = &command{
	name: "act",
	args: "PATTERN [DATA] | MESSAGE | --stream PATTERN [DATA] [-]",
	summary: `Call a pattern and print the answer as JSON.

With PATTERN and DATA, PATTERN routes (plus the --mixin keys of DATA) and the
handler receives DATA alone, as runtime.Node.ActE sends it. With one MESSAGE,
every root key routes and the handler receives the message, as Seneca's act
(runtime.Node.Act). DATA and MESSAGE are JSON or key:value pairs
(role:math,cmd:sum,a:1, nested {} and []); DATA "-" reads the standard input.
A typed pattern's DATA is its request as protobuf JSON. An error prints with
its code, and the exit status is 64 plus the code's number (67
invalid_argument, 69 not_found, 78 unavailable: see 'wizard help'); Ctrl-C
cancels the call and exits 130.

With --stream, act opens a stream (runtime.Node.OpenStream) and prints each
message it receives as one line of JSON, as it arrives. It sends DATA (or
MESSAGE) and, when the last argument is "-", then each line of the standard
input (JSON or key:value pairs; blank lines skipped), and closes its side at
the end: PATTERN DATA for a server stream, PATTERN - (or PATTERN DATA -) for
a client or bidirectional one. It exits as a call does: 0 when the stream
ends OK, 64 plus the code of the error that ends it (printed on the
standard error after the messages received; with --output json, as a last
JSON line), 2 for an input line that is not a message (the stream is
canceled). --timeout bounds joining the mesh, not the stream; Ctrl-C
cancels it and exits 130, a second Ctrl-C exits at once.`,
	example: `wizard act --seeds 127.0.0.1:7946 role:math,cmd:sum 'values:[1,2,3.5]'
wizard act --peers 127.0.0.1:7070 'role:greet,name:ada'
echo '{"values":[2,3]}' | wizard act --peers 127.0.0.1:7070 cmd:product,role:math -
wizard act --stream --peers 127.0.0.1:7070 role:math,cmd:count n:3
(echo value:1; echo value:2.5) | wizard act --stream --peers 127.0.0.1:7070 role:math,cmd:total -`,
	join:  true,
	flags: addCallFlags,
	run:   runAct,
}

func addCallFlags(fs *flag.FlagSet) any {
	f := &callFlags{}
	fs.StringVar(&f.mixin, "mixin", "", "comma-separated keys of DATA that route too")
	fs.BoolVar(&f.noReply, "no-reply", false, "send without waiting for an answer")
	fs.Var(&f.metadata, "metadata", "call metadata key=value (repeatable)")
	fs.BoolVar(&f.stream, "stream", false, `open a stream: send DATA, then each line of the standard input with "-", and print each message received as a JSON line`)
	return f
}

func runAct(ctx context.Context, c *cli, args []string, own any) error {
	if f := own.(*callFlags); f.stream {
		return runActStream(ctx, c, args, f)
	}
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
		return kindHint(err, "act --stream")
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
