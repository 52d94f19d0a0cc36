package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// subCommand is 'wizard sub', listed in [commands].
var subCommand = &command{
	name: "sub",
	args: "PATTERN [PATTERN...]",
	summary: `Subscribe to events and print each as one line of JSON.

sub joins the mesh as a node that serves, subscribes to each PATTERN
(runtime.Node.Subscribe) and prints every event that matches one of them,
as it arrives, as one line of JSON:

  {"pattern":"role:order","group":"wizard-sub-1f2e3d4c","from":"NODE-ID","message":{...}}

pattern is the first PATTERN the event matches (an event matching several
prints once), group the group that received it, from the emitting node's id
and message the event, its pattern's pairs included; with --verbose, also
"metadata", the event's metadata (and the node's log lines on the standard
error).

By default sub is a group of its own, wizard-sub- and a random suffix, so
that it hears every event emitted, beside the groups that handle them, and
takes none away from them. --group G joins the group G instead: sub is then
one of G's members and takes its share of G's events, which G's other
members do not see.

It runs until Ctrl-C (or SIGTERM), which ends it with exit status 0, or
until it has printed --count events. The mesh must be able to reach it: it
joins by gossip (--seeds or --dns; static --peers never learn of it) and
listens on --listen, which the mesh's nodes dial to deliver events; serving
beyond loopback takes TLS (--tls-cert and --tls-key, whose certificate the
mesh must trust) or --insecure.`,
	example: `wizard sub --seeds 127.0.0.1:7946 role:order
wizard sub --seeds 127.0.0.1:7946 --count 1 'role:order,event:placed' | jq .message
wizard sub --seeds 10.0.0.5:7946 --listen 10.0.0.9:0 --tls-ca ca.pem --tls-cert me.pem --tls-key me-key.pem 'user:*'`,
	join:             true,
	untilInterrupted: true,
	flags:            addSubFlags,
	run:              runSub,
}

type subFlags struct {
	group, listen string
	count         int
	announce      bool // say on the standard error when subscribed (the REPL's .sub)
}

func addSubFlags(fs *flag.FlagSet) any {
	f := &subFlags{}
	fs.StringVar(&f.group, "group", "", "join this group, taking its share of its events (default: a group of its own, wizard-sub-RANDOM)")
	fs.StringVar(&f.listen, "listen", "", `address to serve events on (default: the gossip bind address's host, port 0; "127.0.0.1:0" for seeds on loopback)`)
	fs.IntVar(&f.count, "count", 0, "exit 0 after printing this many events (0: until Ctrl-C)")
	return f
}

// tail is a running wizard sub: the patterns it subscribed and what it
// has printed.
type tail struct {
	c       *cli
	pats    []pattern.Pattern
	routers []*pattern.Router[int] // one per pattern: whether an event matches it
	keys    []string               // every key of pats
	verbose bool

	mu      sync.Mutex
	printed int
	count   int
	done    chan struct{} // closed at count, or when the output fails
	err     error         // the output's failure
}

func runSub(ctx context.Context, c *cli, args []string, own any) error {
	f := own.(*subFlags)
	if err := wantArgs("sub", args, 1, len(args), "PATTERN"); err != nil {
		return err
	}
	if f.count < 0 {
		return usagef("--count %d: want 0 (until Ctrl-C) or more", f.count)
	}
	if len(splitList(*c.mesh.peers)) > 0 {
		return usagef("%s: the nodes of static peers never learn of wizard's subscriptions; join by gossip with --seeds or --dns", c.mesh.source("peers"))
	}
	t, err := newTail(c, args, f.count)
	if err != nil {
		return err
	}
	group := f.group
	if group == "" {
		group = "wizard-sub-" + randomSuffix()
	}
	listen := f.listen
	if listen == "" {
		listen = c.mesh.listenDefault()
	}
	c.lines = true
	j, err := c.mesh.join(c.io.err, listen)
	if err != nil {
		return err
	}
	c.j = j
	for i, p := range t.pats {
		if err := j.node.Subscribe(p.String(), group, t.handler(i)); err != nil {
			if runtime.CodeOf(err) == runtime.CodeInvalidArgument {
				return &inputError{patternName(i, len(t.pats)), err}
			}
			return err
		}
	}
	if err := c.settle(ctx); err != nil && ctx.Err() == nil {
		return err // no node answered: none will deliver events
	}
	switch {
	case *c.mesh.verbose:
		fmt.Fprintf(c.io.err, "wizard sub: group %s subscribed to %d patterns, serving at %s\n", group, len(t.pats), j.node.Addr())
	case f.announce:
		fmt.Fprintf(c.io.err, "tailing as group %s; Ctrl-C ends\n", group)
	}
	select {
	case <-t.done:
	case <-ctx.Done():
	}
	// The mesh stops routing events here before the node shuts down.
	for _, p := range t.pats {
		j.node.Unsubscribe(p.String(), group)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.err != nil:
		return t.err
	case t.count > 0 && t.printed >= t.count:
		return nil
	}
	var sig interrupted
	if errors.As(context.Cause(ctx), &sig) {
		return nil // Ctrl-C is how a tail ends
	}
	return context.Cause(ctx)
}

// newTail parses the patterns of a wizard sub; a pattern given twice is
// subscribed once.
func newTail(c *cli, args []string, count int) (*tail, error) {
	t := &tail{c: c, count: count, done: make(chan struct{}), verbose: *c.mesh.verbose}
	seen := map[string]bool{}
	keys := map[string]bool{}
	for i, a := range args {
		p, err := pattern.Parse(a)
		if err != nil {
			return nil, &inputError{patternName(i, len(args)), err}
		}
		if seen[p.String()] {
			continue
		}
		seen[p.String()] = true
		r := pattern.NewRouter[int]()
		if err := r.Add(p, len(t.pats)); err != nil {
			return nil, &inputError{patternName(i, len(args)), err}
		}
		t.pats, t.routers = append(t.pats, p), append(t.routers, r)
		for _, pr := range p.Pairs() {
			if !keys[pr.Key] {
				keys[pr.Key] = true
				t.keys = append(t.keys, pr.Key)
			}
		}
	}
	return t, nil
}

// patternName names the i-th PATTERN (from 0) of n in an error.
func patternName(i, n int) string {
	if n == 1 {
		return "PATTERN"
	}
	return fmt.Sprintf("PATTERN %d", i+1)
}

// randomSuffix is 8 random hex digits: a group of wizard sub's own.
func randomSuffix() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// listenDefault is where wizard sub serves without --listen: port 0 on
// the host gossip binds to (loopback for seeds on loopback), which swim
// advertises.
func (f *meshFlags) listenDefault() string {
	if *f.gossip != "" {
		if host, _, err := net.SplitHostPort(*f.gossip); err == nil {
			return net.JoinHostPort(host, "0")
		}
	}
	if allLoopback(splitList(*f.seeds)) && len(splitList(*f.dns)) == 0 {
		return "127.0.0.1:0"
	}
	return "0.0.0.0:0"
}

// handler is the handler of the i-th pattern. A node runs every
// subscription of a group that matches an event, so an event that
// matches several patterns reaches several handlers: the first matching
// pattern's prints it, the others let it be.
func (t *tail) handler(i int) runtime.Handler {
	return func(ctx context.Context, r runtime.Request) (any, error) {
		if t.earlier(i, r) {
			return nil, nil
		}
		line, err := t.line(ctx, i, r)
		if err != nil {
			return nil, runtime.Errorf(runtime.CodeInternal, "wizard sub: the event does not print as JSON: %v", err)
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.ended() {
			return nil, runtime.Errorf(runtime.CodeUnavailable, "wizard sub: leaving: it has printed the events it was to print")
		}
		if _, err := t.c.io.out.Write(line); err != nil {
			t.err = fmt.Errorf("write an event: %w", err)
			close(t.done)
			return nil, runtime.Errorf(runtime.CodeUnavailable, "wizard sub: its output failed: %v", err)
		}
		t.printed++
		if t.count > 0 && t.printed == t.count {
			close(t.done)
		}
		return nil, nil
	}
}

// ended reports whether the tail has stopped printing. Callers hold mu.
func (t *tail) ended() bool {
	return t.err != nil || t.count > 0 && t.printed >= t.count
}

// earlier reports whether a pattern before the i-th matches r's event:
// that pattern's handler prints it.
func (t *tail) earlier(i int, r runtime.Request) bool {
	if i == 0 {
		return false
	}
	fields := make(map[string]any, len(t.keys))
	for _, k := range t.keys {
		if v := r.Get(k); v != nil {
			fields[k] = v
		}
	}
	for _, rt := range t.routers[:i] {
		if _, _, ok := rt.Find(fields); ok {
			return true
		}
	}
	return false
}

// eventLine is one line of wizard sub's output.
type eventLine struct {
	Pattern  string            `json:"pattern"`
	Group    string            `json:"group"`
	From     string            `json:"from"`
	Message  json.RawMessage   `json:"message"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// line is the event r, received by the i-th pattern, as a line of JSON.
func (t *tail) line(ctx context.Context, i int, r runtime.Request) ([]byte, error) {
	msg, err := eventMessage(r.Msg())
	if err != nil {
		return nil, err
	}
	l := eventLine{Pattern: t.pats[i].String(), Group: r.Group(), From: r.Source().Node, Message: msg}
	if t.verbose {
		l.Metadata = map[string]string{}
		for k, v := range runtime.IncomingMetadata(ctx).All() {
			l.Metadata[k] = v
		}
	}
	b, err := json.Marshal(l)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// eventMessage is an event's message as compact JSON: a protobuf message
// through protojson, bytes as a string when they are UTF-8.
func eventMessage(v any) (json.RawMessage, error) {
	switch m := v.(type) {
	case proto.Message:
		b, err := protojson.Marshal(m)
		if err != nil {
			return nil, err
		}
		// protojson randomises its spacing; a line's should not change.
		var line bytes.Buffer
		if err := json.Compact(&line, b); err != nil {
			return nil, err
		}
		return line.Bytes(), nil
	case []byte:
		if utf8.Valid(m) {
			return json.Marshal(string(m))
		}
	}
	return json.Marshal(v)
}
