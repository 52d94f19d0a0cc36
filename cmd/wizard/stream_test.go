package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/quic"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

// streamNode is a node over TCP serving a stream of each kind, for act
// --stream:
//
//	role:count        server: {to:N} answers {n:1} … {n:N}
//	role:total        client: {n:X}… answers {count, total}
//	role:echo,kind:bidi  bidi: answers each message as it comes, with the trace metadata
//	role:fail         server: {n:1}, {n:2}, then failed_precondition
//	role:hang         server: {n:1}, then waits for the caller's cancel
//	cmd:sum,role:math bidi, typed: each SumRequest answers the running sum
//	role:plain        a unary handler
type streamNode struct {
	*runtime.Node
	entered chan struct{} // role:hang sent its message
	ended   chan error    // role:hang's ctx ended, with this cause
}

func newStreamNode(t *testing.T, kind string) *streamNode {
	t.Helper()
	var tr runtime.Transport
	var err error
	switch kind {
	case "tcp":
		tr, err = tcp.New()
	case "quic":
		tr, err = quic.New(quic.WithInsecureSelfSigned())
	}
	if err != nil {
		t.Fatal(err)
	}
	n, err := runtime.New(runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"), runtime.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n.Shutdown(ctx)
	})
	sn := &streamNode{Node: n, entered: make(chan struct{}, 1), ended: make(chan error, 1)}
	type untyped = runtime.ServerStream[runtime.Request, any]
	add := func(p string, fn func(ctx context.Context, s *untyped) error) {
		if err := n.Add(p, runtime.NewStreamHandler(fn)); err != nil {
			t.Fatal(err)
		}
	}
	add("role:count", countStream)
	add("role:total", func(ctx context.Context, s *untyped) error {
		count, total := 0, 0.0
		for {
			r, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return s.Send(map[string]any{"count": count, "total": total})
			}
			if err != nil {
				return err
			}
			x, ok := r.Float64("n")
			if !ok {
				return runtime.Errorf(runtime.CodeInvalidArgument, "message %d has no number n", count+1)
			}
			count, total = count+1, total+x
		}
	})
	add("role:echo,kind:bidi", func(ctx context.Context, s *untyped) error {
		for {
			r, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := s.Send(map[string]any{"echo": r.Msg(), "trace": runtime.IncomingMetadata(ctx).Get("trace")}); err != nil {
				return err
			}
		}
	})
	add("role:fail", func(ctx context.Context, s *untyped) error {
		for i := range 2 {
			if err := s.Send(map[string]any{"n": i + 1}); err != nil {
				return err
			}
		}
		return runtime.Errorf(runtime.CodeFailedPrecondition, "out of stock")
	})
	add("role:hang", func(ctx context.Context, s *untyped) error {
		if err := s.Send(map[string]any{"n": 1}); err != nil {
			return err
		}
		sn.entered <- struct{}{}
		<-ctx.Done()
		sn.ended <- context.Cause(ctx)
		return ctx.Err()
	})
	if err := n.Add("role:plain", named("role:plain")); err != nil {
		t.Fatal(err)
	}
	sum := mathv1.File_wizard_examples_math_v1_math_proto.Services().ByName("MathService").Methods().ByName("Sum")
	running := func(ctx context.Context, s *runtime.ServerStream[*mathv1.SumRequest, *mathv1.SumResponse]) error {
		total := 0.0
		for {
			req, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			for _, v := range req.GetValues() {
				total += v
			}
			if err := s.Send(&mathv1.SumResponse{Sum: total}); err != nil {
				return err
			}
		}
	}
	if err := n.Add(mathv1.MathServiceSumPattern, runtime.NewStreamHandler(running), runtime.Method(sum)); err != nil {
		t.Fatal(err)
	}
	return sn
}

// countStream is a server stream: {to:N} answers {n:1} … {n:N}.
func countStream(ctx context.Context, s *runtime.ServerStream[runtime.Request, any]) error {
	r, err := s.Recv()
	if err != nil {
		return err
	}
	to, _ := r.Int64("to")
	for i := range to {
		if err := s.Send(map[string]any{"n": i + 1}); err != nil {
			return err
		}
	}
	return nil
}

// TestStream: act --stream against a node over TCP and over QUIC, for
// each kind of stream: the messages received print as JSON lines in
// order, messages go from DATA and from the standard input, an error
// mid-stream exits with its code after the messages received, and bad
// input exits 2 naming the line.
func TestStream(t *testing.T) {
	for _, kind := range []string{"tcp", "quic"} {
		t.Run(kind, func(t *testing.T) { testStream(t, kind) })
	}
}

func testStream(t *testing.T, kind string) {
	n := newStreamNode(t, kind)
	flags := []string{"act", "--stream", "--peers", n.Addr(), "--timeout", "10s", "--transport", kind}
	if kind == "quic" {
		flags = append(flags, "--tls-insecure")
	}
	act := func(t *testing.T, stdin string, args ...string) result {
		t.Helper()
		return wizard(t, stdin, append(flags[:len(flags):len(flags)], args...)...)
	}
	lines := func(format string, from, to int) string {
		var b strings.Builder
		for i := from; i <= to; i++ {
			fmt.Fprintf(&b, format+"\n", i)
		}
		return b.String()
	}

	tests := []struct {
		name  string
		stdin string
		args  []string
		out   string
	}{
		{"server", "", []string{"role:count", "to:3"}, lines(`{"n":%d}`, 1, 3)},
		{"server in order", "", []string{"role:count", "to:1000"}, lines(`{"n":%d}`, 1, 1000)},
		{"server message", "", []string{"role:count,to:2"}, lines(`{"n":%d}`, 1, 2)},
		{"server none", "", []string{"role:count", "to:0"}, ""},
		{"client", "n:1\n\n  \n{\"n\":2.5}\nn:3", []string{"role:total", "-"}, `{"count":3,"total":6.5}` + "\n"},
		{"client DATA first", "n:2\n", []string{"role:total", "n:1", "-"}, `{"count":2,"total":3}` + "\n"},
		{"client empty", "", []string{"role:total", "-"}, `{"count":0,"total":0}` + "\n"},
		{"bidi", "a:1\n[2]\n\"three\"\n", []string{"--metadata", "trace=t1", "role:echo,kind:bidi", "-"},
			`{"echo":{"a":1},"trace":"t1"}` + "\n" + `{"echo":[2],"trace":"t1"}` + "\n" + `{"echo":"three","trace":"t1"}` + "\n"},
		{"typed bidi", "values:[1,2]\n{\"values\":[0.5]}\n", []string{"role:math,cmd:sum", "-"}, `{"sum":3}` + "\n" + `{"sum":3.5}` + "\n"},
		{"typed message", "", []string{"role:math,cmd:sum,values:[4]"}, `{"sum":4}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := act(t, tt.stdin, tt.args...)
			if r.code != 0 || r.err != "" {
				t.Fatalf("exit %d, stderr %q; want 0 and nothing", r.code, r.err)
			}
			if diff := cmp.Diff(tt.out, r.out); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}

	errs := []struct {
		name  string
		stdin string
		args  []string
		code  int
		out   string // "*": any (what arrived before the cancel)
		err   string
	}{
		{"error mid-stream", "", []string{"role:fail", "{}"}, 64 + 9, lines(`{"n":%d}`, 1, 2),
			"wizard act: failed_precondition: out of stock\n"},
		// The caller still sends when the handler has ended the stream.
		{"handler refuses a message", "n:1\nx:2\n" + strings.Repeat("n:1\n", 1000), []string{"role:total", "-"}, 64 + 3, "",
			"wizard act: invalid_argument: message 2 has no number n\n"},
		{"bad line", "n:1\n\nn:[1,\n", []string{"role:total", "-"}, 2, "",
			"wizard act: standard input line 3: column 6: unterminated list: missing ']'\n  n:[1,\n       ^\n"},
		{"bad typed line", "values:[1]\nvalues:x\n", []string{"cmd:sum,role:math", "-"}, 2, "*",
			"wizard act: standard input line 2: invalid_argument: does not fit wizard.examples.math.v1.SumRequest"},
		{"line too large", "n:1\n" + `{"pad":"` + strings.Repeat("x", 5<<20) + `"}` + "\n", []string{"role:total", "-"}, 2, "",
			"wizard act: standard input line 2: resource_exhausted: stream message not sent: "},
		{"not found", "", []string{"role:nobody", "{}"}, 64 + 5, "", "wizard act: not_found: "},
		{"third argument", "", []string{"role:total", "n:1", "n:2"}, 2, "", `wizard act: unexpected argument "n:2": a stream's third argument is "-"`},
		{"mixin", "", []string{"--mixin", "n", "role:total", "n:1"}, 2, "", "wizard act: --mixin does not apply to a stream"},
		{"unary handler", "", []string{"role:plain", "{}"}, 64 + 12, "",
			"wizard act: unimplemented: \"role:plain\" is served by a unary handler: call it (Act), do not open a stream to it: use act without --stream\n"},
	}
	t.Run("error as a JSON line", func(t *testing.T) {
		r := act(t, "", "--output", "json", "role:fail", "{}")
		want := lines(`{"n":%d}`, 1, 2) + `{"error":{"code":"failed_precondition","message":"out of stock"}}` + "\n"
		if diff := cmp.Diff(want, r.out); r.code != 64+9 || diff != "" {
			t.Errorf("exit %d, stdout (-want +got):\n%s", r.code, diff)
		}
	})
	t.Run("call to a stream", func(t *testing.T) {
		r := wizard(t, "", append(slices.DeleteFunc(slices.Clone(flags), func(f string) bool { return f == "--stream" }), "role:count", "to:1")...)
		if want := "wizard act: unimplemented: \"role:count\" serves streams: open a stream to it (Node.OpenStream), not a call: use act --stream\n"; r.code != 64+12 || r.err != want {
			t.Errorf("exit %d, stderr:\n%s\nwant exit %d, stderr:\n%s", r.code, r.err, 64+12, want)
		}
	})
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			r := act(t, tt.stdin, tt.args...)
			if r.code != tt.code || !strings.HasPrefix(r.err, tt.err) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d, stderr starting:\n%s", r.code, r.err, tt.code, tt.err)
			}
			if diff := cmp.Diff(tt.out, r.out); tt.out != "*" && diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStreamInterrupt: Ctrl-C (SIGINT) on wizard act --stream, once a
// message has printed (as it arrived, the stream still open) and while it
// waits for a line of the standard input, cancels the stream at its
// handler and exits 130.
func TestStreamInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	bin := buildWizard(t)
	n := newStreamNode(t, "tcp")
	cmd := exec.Command(bin, "act", "--stream", "--peers", n.Addr(), "--timeout", "60s", "role:hang", "{}", "-")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe() // open, and nothing written: a terminal's
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	if err != nil || line != `{"n":1}`+"\n" {
		t.Fatalf("first line %q (%v); want {\"n\":1} while the stream is open\nstderr: %s", line, err, stderr.String())
	}
	<-n.entered // sent before the handler waits
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-n.ended:
		t.Logf("the handler's ctx ended: %v", cause)
	case <-time.After(30 * time.Second): // a guard
		t.Fatalf("the handler's ctx did not end after SIGINT; stderr: %s", stderr.String())
	}
	rest, _ := io.ReadAll(out)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).ExitStatus() != 130 {
		t.Errorf("wizard act --stream after SIGINT: %v; want exit status 130\nstderr: %s", err, stderr.String())
	}
	if len(rest) != 0 {
		t.Errorf("stdout after the first line %q; want nothing", rest)
	}
	t.Logf("stderr: %s", stderr.String())
}
