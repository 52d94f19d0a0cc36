package microwizard_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/microwizard"
)

// senecaResult is one line of sn-client.js.
type senecaResult struct {
	Name string         `json:"name"`
	Res  map[string]any `json:"res"`
	Err  map[string]any `json:"err"`
	Done bool           `json:"done"`
}

// TestSenecaClientActsOnGo: a real Seneca 3 client, configured with
// client({type: 'tcp', pin}), calls Go handlers: an act, one without
// reply, an error (message kept, no stack), a timeout; raw requests
// show a request whose track holds the node's id (a loop) and one of
// another kind refused unanswered, as Seneca refuses them over TCP, and
// a plain one answered with origin, accept and track.
func TestSenecaClientActsOnGo(t *testing.T) {
	needNode(t, "seneca")
	leak.Check(t)
	const id = "go-seneca-1"
	n := newNode(t, newTransport(t, microwizard.WithSeneca(id)))
	runs := make(chan float64, 8)
	mustAdd(t, n, "role:go,cmd:sum", func(ctx context.Context, req runtime.Request) (any, error) {
		a, _ := req.Float64("a")
		b, _ := req.Float64("b")
		runs <- a + b
		return map[string]any{"answer": a + b, "by": "go"}, nil
	})
	mustAdd(t, n, "role:go,cmd:fail", func(ctx context.Context, req runtime.Request) (any, error) {
		return nil, runtime.NewError(runtime.CodeFailedPrecondition, "the go handler says no")
	})
	release := make(chan struct{})
	defer close(release)
	mustAdd(t, n, "role:go,cmd:slow", func(ctx context.Context, req runtime.Request) (any, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return map[string]any{}, nil
	})
	_, port, _ := strings.Cut(n.Addr(), "127.0.0.1:")
	t.Setenv("LOOPID", id)
	p := startNode(t, "sn-client.js", port, "act", "fail", "timeout", "loop", "badkind", "rawok")
	got := map[string]senecaResult{}
	for {
		var r senecaResult
		p.next(t, &r)
		if r.Done {
			break
		}
		got[r.Name] = r
	}
	if r := got["act"]; r.Err != nil || r.Res["answer"] != 3.0 || r.Res["by"] != "go" {
		t.Errorf("act: got %+v, want answer 3 by go", r)
	}
	if v := testwait.Recv(t, runs); v != 3 {
		t.Errorf("act ran with a+b = %v", v)
	}
	r := got["fail"]
	if msg, _ := r.Err["message"].(string); !strings.Contains(msg, "the go handler says no") {
		t.Errorf("fail: got %+v, want the Go message", r)
	}
	if stack, _ := r.Err["stack"].(string); strings.Contains(stack, ".go:") {
		t.Errorf("fail: a Go stack crossed: %q", stack)
	}
	if r := got["timeout"]; r.Err == nil {
		t.Errorf("timeout: got %+v, want an error", r)
	}
	for _, c := range []string{"loop", "badkind"} {
		if r := got[c]; r.Res["answered"] != false {
			t.Errorf("%s: got %+v, want no answer", c, r)
		}
	}
	line, _ := got["rawok"].Res["line"].(map[string]any)
	want := map[string]any{"id": "o1/t1", "kind": "res", "origin": "someone", "accept": id, "track": []any{"someone"}, "res": map[string]any{"answer": 2.0, "by": "go"}}
	delete(line, "time")
	delete(line, "sync")
	if diff := cmp.Diff(want, line); diff != "" {
		t.Errorf("rawok: the answer (-want +got):\n%s", diff)
	}
	if v := testwait.Recv(t, runs); v != 2 {
		t.Errorf("only rawok ran after act, with a+b = 2; got %v", v)
	}
	select {
	case v := <-runs:
		t.Errorf("a refused request ran (a+b = %v)", v)
	default:
	}
}

// startSeneca runs sn-server.js and returns its address.
func startSeneca(t *testing.T, by string) string {
	t.Helper()
	p := startNode(t, "sn-server.js", by)
	var ready struct{ Port int }
	p.next(t, &ready)
	return "127.0.0.1:" + strconv.Itoa(ready.Port)
}

// TestGoActsOnSeneca: a Go caller reaches a real Seneca listen({type:
// 'tcp'}) through the pins given for its address: Act, ActE (sent as
// the merged act Seneca routes by), an error (message and name kept).
func TestGoActsOnSeneca(t *testing.T) {
	needNode(t, "seneca")
	leak.Check(t)
	addr := startSeneca(t, "seneca")
	tr := newTransport(t, microwizard.WithSeneca(""), microwizard.WithPeer(addr, "role:math,cmd:sum", "role:test,cmd:*"))
	n := callerNode(t, tr, "role:math,cmd:sum")
	ctx := t.Context()
	res, err := n.Act(ctx, "role:math,cmd:sum", map[string]any{"a": 1, "b": 2})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"answer": 3.0, "by": "seneca"}, res.Value()); diff != "" {
		t.Errorf("Act (-want +got):\n%s", diff)
	}
	res, err = n.Act(ctx, "role:test,cmd:echo", map[string]any{"x": "y"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := res.Value().(map[string]any)["got"].(map[string]any); got["x"] != "y" || got["cmd"] != "echo" {
		t.Errorf("echo: got %v", res.Value())
	}
	// An ActE under the glob pin goes as an act of its data with its own
	// pattern's pairs; before, it was refused because the data lacks cmd.
	res, err = n.ActE(ctx, "role:test,cmd:echo", map[string]any{"x": "y"})
	if err != nil {
		t.Fatalf("ActE under a glob pin: %v", err)
	}
	if got, _ := res.Value().(map[string]any)["got"].(map[string]any); got["x"] != "y" || got["cmd"] != "echo" || got["role"] != "test" {
		t.Errorf("ActE under a glob pin: got %v, want the echo of x:y with role:test,cmd:echo", res.Value())
	}
	_, err = n.Act(ctx, "role:test,cmd:fail", nil)
	var e *runtime.Error
	if !errors.As(err, &e) || !strings.Contains(e.Message, "bad input from seneca") || strings.Contains(e.Message, "    at ") {
		t.Errorf("fail: got %v (code %v, name %q), want the Seneca message without a stack", err, runtime.CodeOf(err), microwizard.ErrorName(err))
	}
	checkSenecaFail(t, err)
}

// checkSenecaFail checks the error of sn-server.js's role:test,cmd:fail
// (a RangeError with code out_of_range, which Seneca wraps as
// act_execute) as Go sees it: Seneca's wrapper with the original
// unpacked (its message from Seneca's details, its code), as Seneca's own
// client shows them in err and err.orig, and the code the original's
// names. Before, the original was not unpacked.
func checkSenecaFail(t *testing.T, err error) {
	t.Helper()
	ne := microwizard.NodeErrorOf(err)
	if ne == nil {
		t.Fatalf("fail: %v carries no Node.js error", err)
	}
	want := &microwizard.NodeError{Name: "Error", Message: "seneca: Action cmd:fail,role:test failed: bad input from seneca.", Code: "act_execute",
		Orig: &microwizard.NodeError{Message: "bad input from seneca", Code: "out_of_range"}}
	if diff := cmp.Diff(want, ne); diff != "" {
		t.Errorf("fail: the Node.js error (-want +got):\n%s", diff)
	}
	if runtime.CodeOf(err) != runtime.CodeOutOfRange {
		t.Errorf("fail: code %v, want out_of_range (the original's code)", runtime.CodeOf(err))
	}
}

// TestSenecaMixedMesh: one pattern served by a Seneca node and by a Go
// node (both on Seneca's wire); the Go caller's calls reach both.
func TestSenecaMixedMesh(t *testing.T) {
	needNode(t, "seneca")
	leak.Check(t)
	senAddr := startSeneca(t, "seneca")
	goServer := newNode(t, newTransport(t, microwizard.WithSeneca("")))
	mustAdd(t, goServer, "role:mesh,cmd:who", func(ctx context.Context, req runtime.Request) (any, error) {
		return map[string]any{"by": "go"}, nil
	})
	tr := newTransport(t, microwizard.WithSeneca(""), microwizard.WithPeer(senAddr, "role:mesh,cmd:who"), microwizard.WithPeer(goServer.Addr(), "role:mesh,cmd:who"))
	n := newNode(t, tr, runtime.WithDiscovery(tr.Discovery()))
	seen := map[string]int{}
	testwait.Until(t, "calls reach the Go node and the Seneca node", func() bool {
		res, err := n.Act(t.Context(), "role:mesh,cmd:who", nil)
		if err == nil {
			by, _ := res.Value().(map[string]any)["by"].(string)
			seen[by]++
		}
		return seen["go"] > 0 && seen["seneca"] > 0
	})
}
