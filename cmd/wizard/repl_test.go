package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/internal/testkit/need"
	"github.com/wizardmesh/wizard/runtime"
)

// TestREPL uses wizard repl as a person would, in a terminal that tmux
// gives it: a line and its answer, Tab completion of a pair, a dot
// command, Ctrl-C during a slow call (the call is canceled, the session
// goes on), a .stream and Ctrl-C during one, an .emit and the groups
// that took it, a .sub printing an event another node emits until
// Ctrl-C, Ctrl-D to leave; the history file keeps the lines. It needs
// tmux; without it, it skips, unless WIZARD_REQUIRE=1.
func TestREPL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command: skipped in -short mode")
	}
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		need.Skipf(t, "needs tmux on PATH")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "wizard")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	m := newTestMesh(t, "tcp", nil)
	// Streams for .stream, added before the session joins.
	hung := make(chan error, 1)
	if err := m.nodes[1].Add("role:count", runtime.NewStreamHandler(countStream)); err != nil {
		t.Fatal(err)
	}
	if err := m.nodes[1].Add("role:hang", runtime.NewStreamHandler(func(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
		if err := s.Send(map[string]any{"hung": true}); err != nil {
			return err
		}
		<-ctx.Done()
		hung <- context.Cause(ctx)
		return ctx.Err()
	})); err != nil {
		t.Fatal(err)
	}
	billing := subscribe(t, m.nodes[1], "role:order", "billing", nil)
	socket := fmt.Sprintf("wizard-test-%d", os.Getpid())
	tm := func(args ...string) string {
		out, err := exec.Command(tmux, append([]string{"-L", socket}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	history := filepath.Join(dir, "history")
	cmdline := strings.Join(append(append([]string{bin, "repl"}, m.flags()...), "--history", history), " ") + "; echo EXITED $?; sleep 60"
	tm("new-session", "-d", "-s", "repl", "-x", "200", "-y", "50", cmdline)
	t.Cleanup(func() { exec.Command(tmux, "-L", socket, "kill-server").Run() })
	screen := func() string { return tm("capture-pane", "-p", "-t", "repl") }
	wait := func(what, want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(screen(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s (%q); the screen:\n%s", what, want, screen())
			}
			time.Sleep(20 * time.Millisecond) // polling the screen
		}
	}
	keys := func(k ...string) { tm(append([]string{"send-keys", "-t", "repl"}, k...)...) }

	wait("the prompt", "wizard>")
	keys("cmd:sum,role:math values:[1,2]", "Enter")
	wait("the answer", "\"sum\": 3")

	keys("cmd:pro", "Tab")
	wait("cmd:pro completed", "wizard> cmd:product")
	keys(",role:ma", "Tab")
	wait("role:ma completed", "wizard> cmd:product,role:math")
	keys(" values:[2,5]", "Enter")
	wait("the completed line's answer", "\"product\": 10")

	keys(".metadata trace=t1", "Enter")
	wait("the metadata", "metadata trace=t1")
	keys("role:echo,n:1", "Enter")
	wait("metadata sent", "\"trace\": \"t1\"")

	keys("role:slow", "Enter")
	select { // the call is in flight
	case <-m.slow:
	case <-time.After(30 * time.Second):
		t.Fatalf("the slow call did not arrive; the screen:\n%s", screen())
	}
	keys("C-c")
	wait("the slow call canceled", "canceled")
	keys(".timeout", "Enter")
	wait("the session alive after Ctrl-C", "timeout 10s")

	keys("C-l") // a clear screen, for the stream's "canceled"
	until(t, "the screen cleared", func() bool { return !strings.Contains(screen(), "canceled") })
	keys(".stream role:count to:2 to:9", "Enter") // the second message is not read
	wait("the stream's messages", `{"n":1}`+"\n"+`{"n":2}`+"\n")
	keys(".stream role:hang,x:1", "Enter")
	wait("the stream's first message", `{"hung":true}`)
	keys("C-c")
	select {
	case <-hung:
	case <-time.After(30 * time.Second): // a guard
		t.Fatalf("Ctrl-C did not cancel the stream at its handler; the screen:\n%s", screen())
	}
	wait("the stream canceled", "canceled")
	keys(".timeout", "Enter")
	wait("the session alive after Ctrl-C", "timeout 10s")

	keys("C-l")
	until(t, "the screen cleared", func() bool { return !strings.Contains(screen(), "timeout 10s") })
	keys(".emit role:order id:1", "Enter")
	wait("the groups that took the event", "took    billing\nmissed  -")
	if e := receive(t, "billing", billing); e.msg["id"] != 1.0 {
		t.Errorf("billing received %v, want id 1", e.msg)
	}
	keys(".sub role:order", "Enter")
	wait("the tail subscribed", "tailing as group wizard-sub-")
	group := regexp.MustCompile(`wizard-sub-[0-9a-f]{8}`).FindString(screen())
	emitFrom(t, m.nodes[0], group, "role:order", map[string]any{"id": 2})
	wait("the event tailed", `"message":{"id":2,"role":"order"}`)
	receive(t, "billing", billing)
	keys("C-c")
	keys(".timeout", "Enter")
	wait("the session alive after the tail", "timeout 10s")

	keys("C-d")
	wait("the session ended", "EXITED 0")
	h, err := os.ReadFile(history)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(h), "cmd:product,role:math values:[2,5]\n") {
		t.Errorf("history:\n%s\nwant the completed line", h)
	}
}
