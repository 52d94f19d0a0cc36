package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := context.Background(), func() {}
	if len(os.Args) < 2 || os.Args[1] != "repl" { // the REPL's Ctrl-C cancels one call, not the session
		ctx, stop = interruptible(ctx)
	}
	code := run(ctx, os.Args[1:], &stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr})
	var sig interrupted
	if errors.As(context.Cause(ctx), &sig) && !(code == 0 && untilInterrupted(os.Args[1:])) {
		code = sig.status()
	}
	stop()
	os.Exit(code)
}

// untilInterrupted reports whether the command line args runs a command
// that a signal ends as it should end (wizard sub).
func untilInterrupted(args []string) bool {
	if len(args) == 0 {
		return false
	}
	c := lookup(args[0])
	return c != nil && c.untilInterrupted
}

// interrupted is the cause of a command's context ended by a signal.
type interrupted struct{ sig syscall.Signal }

func (i interrupted) Error() string { return "wizard: interrupted by " + i.sig.String() }

// status is the exit status of a command a signal ended, as a shell's:
// 128 and the signal's number (130 for Ctrl-C).
func (i interrupted) status() int { return 128 + int(i.sig) }

// interruptible returns ctx ended, with an [interrupted] cause, by the
// first SIGINT or SIGTERM; a second one kills the process as the signal
// does by default. stop releases the signal.
func interruptible(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			signal.Stop(sigs)
			cancel(interrupted{s.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// stdio is where a command reads and writes.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// command is one subcommand of wizard.
type command struct {
	name    string
	args    string // the positional arguments, for usage
	summary string
	example string
	// flags registers the command's own flags; the mesh flags are on
	// every command that joins.
	flags func(fs *flag.FlagSet) any
	// join: the command calls the mesh.
	join bool
	// untilInterrupted: the command runs until Ctrl-C or SIGTERM, which
	// end it with exit status 0 when it ran well (wizard sub).
	untilInterrupted bool
	run              func(ctx context.Context, c *cli, args []string, own any) error
}

// usageError is bad usage or input: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// failure is a command that failed in a way already printed: exit 1.
var errFailed = errors.New("failed")

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, io *stdio) int {
	if len(args) == 0 {
		topUsage(io.err)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		topUsage(io.out)
		return 0
	}
	if args[0] == "help" {
		if len(args) > 1 {
			if c := lookup(args[1]); c != nil {
				fs, _, _ := c.flagSet(io.out)
				fs.Usage()
				return 0
			}
			fmt.Fprintf(io.err, "wizard: help: unknown command %q\n", args[1])
			return 2
		}
		topUsage(io.out)
		return 0
	}
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(io.err, "wizard: unknown command %q; run 'wizard help' for the list\n", args[0])
		return 2
	}
	// What the flag package prints goes to the standard output for
	// --help, which asked for it, else to the standard error.
	var printed bytes.Buffer
	fs, mf, own := c.flagSet(&printed)
	pos, err := parseInterleaved(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		io.out.Write(printed.Bytes())
		return 0
	}
	io.err.Write(printed.Bytes())
	if err != nil {
		return 2 // the flag package printed it, with the usage
	}
	fs.SetOutput(io.err)
	cl := &cli{io: io, cmd: c, mesh: mf, fs: fs}
	if err := cl.configure(); err != nil {
		return cl.fail(err)
	}
	defer cl.close()
	return cl.fail(c.run(ctx, cl, pos, own))
}

// flagSet is c's flag set: its own flags and, for a command that joins,
// the mesh flags.
func (c *command) flagSet(out io.Writer) (*flag.FlagSet, *meshFlags, any) {
	fs := flag.NewFlagSet("wizard "+c.name, flag.ContinueOnError)
	fs.SetOutput(out)
	var own any
	if c.flags != nil {
		own = c.flags(fs)
	}
	var mf *meshFlags
	if c.join {
		mf = addMeshFlags(fs)
	} else {
		addOutputFlag(fs)
	}
	fs.Usage = func() {
		fmt.Fprintf(out, "usage: wizard %s [flags] %s\n\n%s\n\nExample:\n%s\n\nFlags (each also from the environment: WIZARD_ and its name in upper case):\n", c.name, c.args, c.summary, indent(c.example))
		fs.PrintDefaults()
	}
	return fs, mf, own
}

func indent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n")
}

func topUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: wizard COMMAND [flags] [arguments]")
	fmt.Fprintln(w, "\nwizard calls and inspects a wizard mesh. Commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, firstLine(c.summary))
	}
	fmt.Fprintln(w, "\nRun 'wizard help COMMAND' for a command's flags and an example.")
	fmt.Fprintln(w, "\nExit status: 0 success; 1 a failure without a code (a bench whose calls all")
	fmt.Fprintln(w, "failed, a node not serving); 2 bad usage or input; 64 plus the wizard code of a")
	fmt.Fprintln(w, "failed call or join (67 invalid_argument, 68 deadline_exceeded, 69 not_found,")
	fmt.Fprintln(w, "78 unavailable; gRPC's numbers); 130 interrupted by Ctrl-C.")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// parseInterleaved parses args with fs, flags and positional arguments
// in any order; after "--" everything is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var tail []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, tail = args[:i], args[i+1:]
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return append(pos, tail...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
