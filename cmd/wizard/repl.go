package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/chzyer/readline"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// replCommand is 'wizard repl', listed in [commands].
var replCommand = &command{
	name: "repl",
	summary: `An interactive shell on the mesh. Each line is a call, as act takes it:
PATTERN DATA (separated by a space) or one MESSAGE; the answer is printed as
indented JSON. Tab completes dot commands, and keys and key:value pairs of
the mesh's patterns. Ctrl-C cancels the call in flight (or clears the line),
Ctrl-D leaves. History is kept in --history. Dot commands:

  .members               the nodes of the mesh
  .patterns [GLOB]       the patterns and their targets
  .explain ARG           which pattern answers ARG, and why
  .describe PATTERN      a typed pattern's schema
  .stream ARGS           open a stream, as act --stream: PATTERN DATA... (each
                         DATA a message, separated by spaces) or MESSAGE; each
                         message received prints as a JSON line
  .emit ARGS             emit an event, as wizard emit: PATTERN DATA or MESSAGE;
                         prints the groups that took it and missed it
  .sub PATTERN...        tail events, as wizard sub (a node of its own that
                         serves, in a group of its own): one JSON line per
                         event, until Ctrl-C
  .timeout [DURATION]    show or set the call timeout
  .metadata [k=v ...]    show or set the metadata of every call (.metadata - clears it)
  .help                  this list
  .quit                  leave (as Ctrl-D)`,
	example: `wizard repl --seeds 127.0.0.1:7946
wizard> role:math,cmd:sum values:[1,2]`,
	join:  true,
	flags: addReplFlags,
	run:   runRepl,
}

type replFlags struct{ history string }

func addReplFlags(fs *flag.FlagSet) any {
	f := &replFlags{}
	def := ""
	if home, err := os.UserHomeDir(); err == nil {
		def = filepath.Join(home, ".wizard_history")
	}
	if v, ok := os.LookupEnv(envName("history")); ok {
		def = v
	}
	fs.StringVar(&f.history, "history", def, `history file ("" keeps none)`)
	return f
}

var dotCommands = []string{".members", ".patterns", ".explain", ".describe", ".stream", ".emit", ".sub", ".timeout", ".metadata", ".help", ".quit"}

// repl is the state of an interactive session.
type repl struct {
	c       *cli
	n       *runtime.Node
	out     io.Writer
	timeout time.Duration
	md      metadataFlag
}

func runRepl(ctx context.Context, c *cli, args []string, own any) error {
	if err := wantArgs("repl", args, 0, 0, ""); err != nil {
		return err
	}
	n, err := c.node(ctx)
	if err != nil {
		return err
	}
	r := &repl{c: c, n: n, timeout: *c.mesh.timeout}
	rl, err := readline.NewEx(&readline.Config{
		Prompt:          "wizard> ",
		HistoryFile:     own.(*replFlags).history,
		AutoComplete:    completer{r},
		InterruptPrompt: "^C",
		EOFPrompt:       "",
		Stdin:           readerCloser(c.io.in),
		Stdout:          c.io.out,
		Stderr:          c.io.err,
	})
	if err != nil {
		return fmt.Errorf("repl: %w", err)
	}
	defer rl.Close()
	r.out = rl.Stdout()
	// The session's output goes where readline redraws the prompt.
	c.io = &stdio{in: c.io.in, out: rl.Stdout(), err: rl.Stderr()}
	fmt.Fprintf(r.out, "wizard: %d members, %d patterns; .help lists the commands, Ctrl-D leaves\n", len(n.Members())-1, len(n.Patterns()))
	for {
		line, err := rl.Readline()
		switch {
		case errors.Is(err, readline.ErrInterrupt):
			continue
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, ".") {
			if r.dot(ctx, line) {
				return nil
			}
			continue
		}
		r.act(ctx, line)
	}
}

// readerCloser gives readline the reader it wants.
func readerCloser(r io.Reader) io.ReadCloser {
	if rc, ok := r.(io.ReadCloser); ok {
		return rc
	}
	return io.NopCloser(r)
}

// act makes the call a line asks for; Ctrl-C cancels it.
func (r *repl) act(ctx context.Context, line string) {
	cl, err := prepare(ctx, r.n, splitLine(line), strings.NewReader(""), &callFlags{metadata: r.md})
	if err != nil {
		r.printErr(err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	defer onInterrupt(cancel)()
	res, err := cl.send(ctx, r.n)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			fmt.Fprintln(r.out, "canceled")
			return
		}
		r.printErr(kindHint(err, ".stream"))
		return
	}
	b, err := answerJSON(res, cl.method)
	if err != nil {
		r.printErr(err)
		return
	}
	fmt.Fprintf(r.out, "%s\n", b)
}

// onInterrupt calls cancel on Ctrl-C (SIGINT) until the returned stop
// is called: the REPL's Ctrl-C ends the call in flight, not the session.
func onInterrupt(cancel func()) (stop func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	done := make(chan struct{})
	go func() {
		select {
		case <-sig:
			cancel()
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
	}
}

// stream opens the stream a .stream line asks for, sends its messages and
// prints each message received; Ctrl-C cancels it. The call timeout does
// not bound a stream.
func (r *repl) stream(ctx context.Context, arg string) {
	cl, first, err := prepareStream(ctx, r.n, splitFields(arg), false, &callFlags{metadata: r.md})
	if err != nil {
		r.printErr(err)
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer onInterrupt(cancel)()
	if err := cl.stream(ctx, r.n, first, nil, r.out); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			fmt.Fprintln(r.out, "canceled")
			return
		}
		r.printErr(kindHint(err, "a line without .stream"))
	}
}

// emit emits the event an .emit line gives and prints which groups took
// it; Ctrl-C cancels it.
func (r *repl) emit(ctx context.Context, arg string) {
	ev, err := parseEvent(splitLine(arg), strings.NewReader(""))
	if err != nil {
		r.printErr(err)
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer onInterrupt(cancel)()
	err = ev.waitForSubscriber(ctx, r.n, r.timeout)
	var d runtime.Delivery
	if err == nil {
		d, err = ev.emit(ctx, r.n, r.timeout, &emitFlags{metadata: r.md})
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		fmt.Fprintln(r.out, "canceled")
		return
	}
	fmt.Fprint(r.out, deliveryText(d))
	if err != nil {
		r.printErr(err)
	}
}

// sub tails the events a .sub line's patterns match, as wizard sub does,
// through a node of its own, until Ctrl-C: the session's node only
// calls, and a subscriber must serve.
func (r *repl) sub(ctx context.Context, arg string) {
	c := *r.c
	c.cmd, c.j = subCommand, nil
	defer c.close()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer onInterrupt(func() { cancel(interrupted{syscall.SIGINT}) })()
	if err := runSub(ctx, &c, splitFields(arg), &subFlags{announce: true}); err != nil {
		r.printErr(err)
	}
}

func (r *repl) printErr(err error) {
	fmt.Fprintf(r.out, "error: %s\n", errorText(err))
}

// splitLine splits a line into PATTERN and DATA at the first space
// outside brackets and quotes, or keeps it whole as one MESSAGE.
func splitLine(line string) []string {
	head, rest, ok := cutField(line)
	if _, err := pattern.Parse(head); ok && err == nil {
		return []string{head, rest}
	}
	return []string{line}
}

// splitFields splits a line at each space outside brackets and quotes:
// PATTERN and each DATA of a .stream line.
func splitFields(line string) []string {
	var fields []string
	for line != "" {
		head, rest, _ := cutField(line)
		fields = append(fields, head)
		line = rest
	}
	return fields
}

// cutField cuts line at its first space outside brackets and quotes; ok
// reports whether something other than space follows it.
func cutField(line string) (head, rest string, ok bool) {
	depth, quote := 0, byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		case depth == 0 && (c == ' ' || c == '\t'):
			rest = strings.TrimSpace(line[i+1:])
			return line[:i], rest, rest != ""
		}
	}
	return line, "", false
}

// dot runs a dot command; it reports whether the session ends.
func (r *repl) dot(ctx context.Context, line string) bool {
	name, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	sub := func(cmd *command, args ...string) {
		c := *r.c
		c.cmd = cmd
		if err := c.cmd.run(ctx, &c, args, nil); err != nil {
			r.printErr(err)
		}
	}
	switch name {
	case ".quit", ".exit":
		return true
	case ".help":
		fmt.Fprintln(r.out, strings.Join(dotCommands, " "))
	case ".members":
		sub(membersCommand)
	case ".patterns":
		if arg == "" {
			sub(patternsCommand)
		} else {
			sub(patternsCommand, arg)
		}
	case ".stream":
		if arg == "" {
			fmt.Fprintln(r.out, "error: .stream needs PATTERN DATA... or MESSAGE")
			break
		}
		r.stream(ctx, arg)
	case ".emit":
		if arg == "" {
			fmt.Fprintln(r.out, "error: .emit needs PATTERN DATA or MESSAGE")
			break
		}
		r.emit(ctx, arg)
	case ".sub":
		if arg == "" {
			fmt.Fprintln(r.out, "error: .sub needs PATTERN...")
			break
		}
		r.sub(ctx, arg)
	case ".explain", ".describe":
		if arg == "" {
			fmt.Fprintf(r.out, "error: %s needs an argument\n", name)
			break
		}
		cmd := explainCommand
		if name == ".describe" {
			cmd = describeCommand
		}
		sub(cmd, arg)
	case ".timeout":
		if arg != "" {
			d, err := time.ParseDuration(arg)
			if err != nil || d <= 0 {
				fmt.Fprintf(r.out, "error: .timeout %q: want a positive duration such as 2s\n", arg)
				break
			}
			r.timeout = d
		}
		fmt.Fprintf(r.out, "timeout %v\n", r.timeout)
	case ".metadata":
		switch arg {
		case "":
		case "-":
			r.md = nil
		default:
			var md metadataFlag
			for _, kv := range strings.Fields(arg) {
				if err := md.Set(kv); err != nil {
					fmt.Fprintf(r.out, "error: .metadata %v\n", err)
					return false
				}
			}
			r.md = md
		}
		var pairs []string
		for i := 0; i+1 < len(r.md); i += 2 {
			pairs = append(pairs, r.md[i]+"="+r.md[i+1])
		}
		fmt.Fprintf(r.out, "metadata %s\n", strings.Join(pairs, " "))
	default:
		fmt.Fprintf(r.out, "error: unknown command %s; .help lists them\n", name)
	}
	return false
}

// completer completes dot commands, and the keys and key:value pairs of
// the patterns in routing.
type completer struct{ r *repl }

func (c completer) Do(line []rune, pos int) ([][]rune, int) {
	head := string(line[:pos])
	start := strings.LastIndexAny(head, ", {[") + 1
	word := head[start:]
	var cands []string
	if start == 0 && strings.HasPrefix(word, ".") {
		cands = dotCommands
	} else {
		seen := map[string]bool{}
		for _, p := range c.r.n.Patterns() {
			for _, pr := range p.Pattern.Pairs() {
				for _, s := range []string{pr.Key + ":", pr.Key + ":" + pr.Value} {
					if !seen[s] {
						seen[s] = true
						cands = append(cands, s)
					}
				}
			}
		}
		slices.Sort(cands)
	}
	var out [][]rune
	for _, s := range cands {
		if strings.HasPrefix(s, word) && s != word {
			out = append(out, []rune(s[len(word):]))
		}
	}
	return out, len([]rune(word))
}
