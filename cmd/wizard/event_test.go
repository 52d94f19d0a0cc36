package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// eventSeen is an event a test subscription received.
type eventSeen struct {
	group string
	msg   map[string]any
	trace string
}

// subscribe subscribes a handler to pattern in group on n that sends
// what it receives to the returned channel and fails with fail, if not
// nil.
func subscribe(t *testing.T, n *runtime.Node, pattern, group string, fail error) chan eventSeen {
	t.Helper()
	seen := make(chan eventSeen, 16)
	err := n.Subscribe(pattern, group, func(ctx context.Context, r runtime.Request) (any, error) {
		m, _ := r.Msg().(map[string]any)
		seen <- eventSeen{r.Group(), m, runtime.IncomingMetadata(ctx).Get("trace")}
		return nil, fail
	})
	if err != nil {
		t.Fatal(err)
	}
	return seen
}

// receive returns the next event from seen, failing t after a guard.
func receive(t *testing.T, what string, seen chan eventSeen) eventSeen {
	t.Helper()
	select {
	case e := <-seen:
		return e
	case <-time.After(30 * time.Second): // a guard
		t.Fatalf("%s: no event", what)
		return eventSeen{}
	}
}

// TestEmit: wizard emit against a mesh whose node-b subscribes role:order
// in group billing and node-c role:order,event:placed in group shipping
// (and role:order,event:fail in group mail, whose handler fails). An
// event both match is taken by both groups, each handler receiving it
// once; --output json prints the two lists; a failing group is named as
// missed with the runtime's text and its code's exit status; no
// subscriber, a bad pattern and bad DATA each exit saying what is wrong.
func TestEmit(t *testing.T) {
	m := newTestMesh(t, "tcp", nil)
	billing := subscribe(t, m.nodes[1], "role:order", "billing", nil)
	shipping := subscribe(t, m.nodes[2], "role:order,event:placed", "shipping", nil)
	mail := subscribe(t, m.nodes[2], "role:order,event:fail", "mail", runtime.Errorf(runtime.CodeFailedPrecondition, "mailbox full"))

	t.Run("two groups", func(t *testing.T) {
		r := m.run(t, "emit", "--metadata", "trace=t1", "role:order,event:placed", "id:7,total:12.5")
		if want := "took    billing, shipping\nmissed  -\n"; r.code != 0 || r.out != want || r.err != "" {
			t.Fatalf("exit %d, stdout %q, stderr %q; want exit 0, stdout %q", r.code, r.out, r.err, want)
		}
		want := map[string]any{"role": "order", "event": "placed", "id": 7.0, "total": 12.5}
		for _, g := range []struct {
			name string
			seen chan eventSeen
		}{{"billing", billing}, {"shipping", shipping}} {
			e := receive(t, g.name, g.seen)
			if diff := cmp.Diff(eventSeen{g.name, want, "t1"}, e, cmp.AllowUnexported(eventSeen{})); diff != "" {
				t.Errorf("%s received (-want +got):\n%s", g.name, diff)
			}
		}
	})

	t.Run("json", func(t *testing.T) {
		r := m.run(t, "emit", "--output", "json", `{"role":"order","event":"placed","id":8}`)
		var got deliveryJSON
		if err := json.Unmarshal([]byte(r.out), &got); err != nil || r.code != 0 {
			t.Fatalf("exit %d, stdout %q (%v), stderr %q", r.code, r.out, err, r.err)
		}
		if diff := cmp.Diff(deliveryJSON{Took: []string{"billing", "shipping"}, Missed: []string{}}, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		receive(t, "billing", billing)
		receive(t, "shipping", shipping)
	})

	t.Run("stdin", func(t *testing.T) {
		r := wizard(t, `{"id":9}`, append(append([]string{"emit"}, m.flags()...), "role:order", "-")...)
		if want := "took    billing\nmissed  -\n"; r.code != 0 || r.out != want {
			t.Fatalf("exit %d, stdout %q, stderr %q; want %q", r.code, r.out, r.err, want)
		}
		if e := receive(t, "billing", billing); e.msg["id"] != 9.0 {
			t.Errorf("billing received %v, want id 9", e.msg)
		}
	})

	t.Run("missed", func(t *testing.T) {
		r := m.run(t, "emit", "role:order,event:fail", "id:10")
		wantErr := `wizard emit: failed_precondition: event "event:fail,id:10,role:order": 1 of 2 groups missed it: mail (failed_precondition: mailbox full)` + "\n"
		if want := "took    billing\nmissed  mail\n"; r.code != 64+9 || r.out != want || r.err != wantErr {
			t.Errorf("exit %d, stdout %q, stderr %q; want exit 73, stdout %q, stderr %q", r.code, r.out, r.err, want, wantErr)
		}
		receive(t, "billing", billing)
		receive(t, "mail", mail)

		r = m.run(t, "emit", "--output", "json", "role:order,event:fail", "id:11")
		var got struct {
			Took, Missed []string
			Error        struct{ Code, Message string }
		}
		if err := json.Unmarshal([]byte(r.out), &got); err != nil {
			t.Fatalf("stdout %q: %v", r.out, err)
		}
		if r.code != 64+9 || r.err != "" || !cmp.Equal(got.Took, []string{"billing"}) || !cmp.Equal(got.Missed, []string{"mail"}) ||
			got.Error.Code != "failed_precondition" || !strings.Contains(got.Error.Message, "mail (failed_precondition: mailbox full)") {
			t.Errorf("exit %d, stdout %s, stderr %q; want exit 73, one object naming mail and why", r.code, r.out, r.err)
		}
		receive(t, "billing", billing)
		receive(t, "mail", mail)
	})

	t.Run("broadcast", func(t *testing.T) {
		r := m.run(t, "emit", "--broadcast", "role:order,event:placed", "id:12")
		if want := "took    node-b, node-c\nmissed  -\n"; r.code != 0 || r.out != want {
			t.Errorf("exit %d, stdout %q, stderr %q; want %q", r.code, r.out, r.err, want)
		}
		receive(t, "billing", billing)
		receive(t, "shipping", shipping)
	})

	t.Run("no reply", func(t *testing.T) {
		r := m.run(t, "emit", "--no-reply", "role:order", "id:13")
		if want := "took    billing\nmissed  -\n"; r.code != 0 || r.out != want {
			t.Errorf("exit %d, stdout %q, stderr %q; want %q", r.code, r.out, r.err, want)
		}
		if e := receive(t, "billing", billing); e.msg["id"] != 13.0 {
			t.Errorf("billing received %v, want id 13", e.msg)
		}
	})

	t.Run("errors", func(t *testing.T) {
		tests := []struct {
			name string
			args []string
			code int
			err  string // the standard error
		}{
			{"no subscriber", []string{"--timeout", "300ms", "role:nobody", "id:1"}, 64 + 5, "wizard emit: not_found: no subscription matches \"id:1,role:nobody\"\n"},
			{"bad pattern", []string{"role:", "id:1"}, 2, "wizard emit: PATTERN: wizard: bad pattern \"role:\" at offset 5: missing value for key \"role\"\n"},
			{"bad data", []string{"role:order", `{"id":`}, 2, "wizard emit: DATA: at offset 6 (line 1, column 7): "},
			{"data not an object", []string{"role:order", "[1]"}, 2, "wizard emit: DATA: at offset 0 (line 1, column 1): want an object (key:value pairs), not a list\n"},
			{"bad message", []string{"role:order,id:"}, 2, "wizard emit: MESSAGE: "},
			{"no pattern", nil, 2, "wizard emit: missing PATTERN; see 'wizard help emit'\n"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := m.run(t, "emit", tt.args...)
				if r.code != tt.code || !strings.HasPrefix(r.err, tt.err) || r.out != "" {
					t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit %d, no stdout, stderr starting:\n%s", r.code, r.out, r.err, tt.code, tt.err)
				}
			})
		}
	})
	for name, ch := range map[string]chan eventSeen{"billing": billing, "shipping": shipping, "mail": mail} {
		if len(ch) > 0 {
			t.Errorf("%s received %d events more than the emits sent", name, len(ch))
		}
	}
}

// subRun is a wizard sub running in-process: its lines as they come, and
// its exit status at the end.
type subRun struct {
	lines  chan string
	code   chan int
	stderr *lockedBuffer
	stop   context.CancelCauseFunc
}

// startSub runs wizard sub against m with args.
func startSub(t *testing.T, m *testMesh, args ...string) *subRun {
	t.Helper()
	ctx, stop := context.WithCancelCause(t.Context())
	t.Cleanup(func() { stop(nil) })
	pr, pw := io.Pipe()
	s := &subRun{lines: make(chan string, 64), code: make(chan int, 1), stderr: &lockedBuffer{}, stop: stop}
	go func() {
		code := run(ctx, append(append([]string{"sub"}, m.flags()...), args...), &stdio{in: strings.NewReader(""), out: pw, err: s.stderr})
		pw.Close()
		s.code <- code
	}()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	return s
}

// line returns the next line, failing t after a guard.
func (s *subRun) line(t *testing.T) eventLine {
	t.Helper()
	select {
	case l, ok := <-s.lines:
		if !ok {
			t.Fatalf("wizard sub ended; stderr: %s", s.stderr.String())
		}
		var e eventLine
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		return e
	case <-time.After(30 * time.Second): // a guard
		t.Fatalf("no line from wizard sub; stderr: %s", s.stderr.String())
		return eventLine{}
	}
}

// exit returns the exit status, failing t after a guard.
func (s *subRun) exit(t *testing.T) int {
	t.Helper()
	select {
	case c := <-s.code:
		return c
	case <-time.After(30 * time.Second): // a guard
		t.Fatalf("wizard sub did not exit; stderr: %s", s.stderr.String())
		return 0
	}
}

// lockedBuffer is a buffer that goroutines write to and a test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// emitFrom emits an event from n once a subscription of group matches it.
func emitFrom(t *testing.T, n *runtime.Node, group, pattern string, msg map[string]any) runtime.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := n.WaitForSubscribers(ctx, pattern, group); err != nil {
		t.Fatal(err)
	}
	d, err := n.Emit(ctx, pattern, msg)
	if err != nil {
		t.Fatalf("Emit %s: %v", pattern, err)
	}
	return d
}

// TestSub: wizard sub prints the events another node emits as JSON lines
// (its pattern, its group, the emitter's id, the message), in a group of
// its own beside a service's group, which still takes every event; an
// event matching two of its patterns prints once; it exits 0 at --count,
// and at Ctrl-C; --group joins a group; bad patterns, --peers and a
// reserved key exit 2 saying what is wrong.
func TestSub(t *testing.T) {
	m := newTestMesh(t, "tcp", nil)
	emitter := m.nodes[0]
	billing := subscribe(t, m.nodes[1], "role:tail", "billing", nil)

	t.Run("count", func(t *testing.T) {
		s := startSub(t, m, "--count", "2", "--verbose", "role:tail", "role:tail,kind:x")
		// The sub's group is its own: --verbose names it.
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		var group string
		ready := regexp.MustCompile(`wizard sub: group (wizard-sub-[0-9a-f]{8}) subscribed`)
		until(t, "wizard sub's subscription", func() bool {
			if m := ready.FindStringSubmatch(s.stderr.String()); m != nil {
				group = m[1]
			}
			return group != ""
		})
		if err := emitter.WaitForSubscribers(ctx, "role:tail", group, "billing"); err != nil {
			t.Fatal(err)
		}
		d, err := emitter.Emit(runtime.AppendMetadata(ctx, "trace", "t7"), "role:tail,kind:x", map[string]any{"n": 1}) // matches both patterns
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"billing", group}; !cmp.Equal(orEmpty(d.Took), orEmpty(want)) {
			t.Errorf("took %v, want %v: the sub's group beside billing", d.Took, want)
		}
		if _, err := emitter.Emit(ctx, "role:tail,kind:y", map[string]any{"n": 2}); err != nil {
			t.Fatal(err)
		}
		got := []eventLine{s.line(t), s.line(t)}
		want := []eventLine{
			{Pattern: "role:tail", Group: group, From: "node-a", Message: json.RawMessage(`{"kind":"x","n":1,"role":"tail"}`), Metadata: map[string]string{"trace": "t7"}},
			{Pattern: "role:tail", Group: group, From: "node-a", Message: json.RawMessage(`{"kind":"y","n":2,"role":"tail"}`)},
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b json.RawMessage) bool { return jsonEqual(a, b) })); diff != "" {
			t.Errorf("lines (-want +got):\n%s", diff)
		}
		if c := s.exit(t); c != 0 {
			t.Errorf("exit %d after --count 2; stderr: %s", c, s.stderr.String())
		}
		receive(t, "billing", billing)
		receive(t, "billing", billing)
		left(t, m)
	})

	t.Run("interrupt", func(t *testing.T) {
		s := startSub(t, m, "--group", "tailers", "role:tail")
		d := emitFrom(t, emitter, "tailers", "role:tail", map[string]any{"n": 3})
		if !cmp.Equal(orEmpty(d.Took), []string{"billing", "tailers"}) {
			t.Errorf("took %v, want billing and tailers", d.Took)
		}
		if l := s.line(t); l.Group != "tailers" {
			t.Errorf("line %+v, want group tailers", l)
		}
		receive(t, "billing", billing)
		s.stop(interrupted{syscall.SIGINT})
		if c := s.exit(t); c != 0 {
			t.Errorf("exit %d after Ctrl-C, want 0; stderr: %s", c, s.stderr.String())
		}
		left(t, m)
	})

	t.Run("errors", func(t *testing.T) {
		tests := []struct {
			name string
			args []string
			code int
			err  string
		}{
			{"bad pattern", []string{"role:tail", "role:"}, 2, "wizard sub: PATTERN 2: wizard: bad pattern \"role:\" at offset 5: missing value for key \"role\"\n"},
			{"reserved key", []string{"role:tail,wizard.group:x"}, 2, "wizard sub: PATTERN: invalid_argument: Subscribe(\"role:tail,wizard.group:x\""},
			{"bad group", []string{"--group", "a b", "role:tail"}, 2, "wizard sub: PATTERN: invalid_argument: Subscribe(\"role:tail\", \"a b\"): the group \"a b\" holds a space"},
			{"count", []string{"--count", "-1", "role:tail"}, 2, "wizard sub: --count -1: want 0 (until Ctrl-C) or more\n"},
			{"no pattern", nil, 2, "wizard sub: missing PATTERN; see 'wizard help sub'\n"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := m.run(t, "sub", tt.args...)
				if r.code != tt.code || !strings.HasPrefix(r.err, tt.err) || r.out != "" {
					t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit %d, stderr starting:\n%s", r.code, r.out, r.err, tt.code, tt.err)
				}
			})
		}
		r := wizard(t, "", "sub", "--peers", emitter.Addr(), "role:tail")
		if want := "wizard sub: --peers: the nodes of static peers never learn of wizard's subscriptions; join by gossip with --seeds or --dns\n"; r.code != 2 || r.err != want {
			t.Errorf("--peers: exit %d, stderr %q; want 2, %q", r.code, r.err, want)
		}
	})
}

// left waits until the nodes of m know only each other: a wizard sub
// that ended has left the mesh, and its group with it.
func left(t *testing.T, m *testMesh) {
	t.Helper()
	until(t, "wizard sub's node to leave the mesh", func() bool {
		for _, n := range m.nodes {
			if len(n.Members()) != len(m.nodes) {
				return false
			}
		}
		return true
	})
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && cmp.Equal(x, y)
}

// TestSubInterrupt: Ctrl-C (SIGINT) ends a wizard sub process that has
// printed an event with exit status 0, its output a whole line, and the
// mesh's nodes see its node leave.
func TestSubInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	bin := buildWizard(t)
	m := newTestMesh(t, "tcp", nil)
	cmd := exec.Command(bin, append(append([]string{"sub"}, m.flags()...), "--verbose", "role:tail")...)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	var group string
	ready := regexp.MustCompile(`wizard sub: group (wizard-sub-[0-9a-f]{8}) subscribed`)
	until(t, "wizard sub's subscription", func() bool {
		if m := ready.FindStringSubmatch(stderr.String()); m != nil {
			group = m[1]
		}
		return group != ""
	})
	emitFrom(t, m.nodes[0], group, "role:tail", map[string]any{"n": 1})
	lines := bufio.NewReader(stdout)
	line, err := lines.ReadString('\n')
	if err != nil {
		t.Fatalf("read a line: %v; stderr: %s", err, stderr.String())
	}
	var e eventLine
	if err := json.Unmarshal([]byte(line), &e); err != nil || e.Group != group || !jsonEqual(e.Message, []byte(`{"n":1,"role":"tail"}`)) {
		t.Errorf("line %q (%v): want the event in group %s", line, err, group)
	}
	until(t, "the emitter to list wizard sub's node", func() bool { return len(m.nodes[0].Members()) == len(m.nodes)+1 })
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(lines)
	if err := cmd.Wait(); err != nil {
		t.Errorf("wizard sub after SIGINT: %v; want exit status 0\nstderr: %s", err, stderr.String())
	}
	if len(rest) != 0 {
		t.Errorf("after the event, stdout %q; want nothing", rest)
	}
	left(t, m)
}

// TestEmitToSubscriberOnly: wizard emit joins, by static peers, a node
// that adds no handler and only subscribes (its catalog lists no
// handlers' patterns), and the event reaches it.
func TestEmitToSubscriberOnly(t *testing.T) {
	tr, err := tcp.New()
	if err != nil {
		t.Fatal(err)
	}
	n, err := runtime.New(runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"), runtime.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	seen := subscribe(t, n, "role:audit", "audit", nil)
	r := wizard(t, "", "emit", "--peers", n.Addr(), "--timeout", "10s", "role:audit", "n:1")
	if want := "took    audit\nmissed  -\n"; r.code != 0 || r.out != want {
		t.Fatalf("exit %d, stdout %q, stderr %q; want %q", r.code, r.out, r.err, want)
	}
	if e := receive(t, "audit", seen); e.msg["n"] != 1.0 {
		t.Errorf("audit received %v, want n 1", e.msg)
	}
}
