package microwizard_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/microwizard"
)

// TestSenecaHTTPClientActsOnGo: a real Seneca 3 client of type 'http'
// calls a Go handler (an act, an error: answered 500, as Seneca
// answers one); raw POSTs show a looped request
// answered 500 message_loop, as Seneca answers it over HTTP, and a plain
// one answered 200 with seneca-accept naming the node.
func TestSenecaHTTPClientActsOnGo(t *testing.T) {
	needNode(t, "seneca")
	leak.Check(t)
	const id = "go-seneca-http-1"
	n := newNode(t, newTransport(t, microwizard.WithSenecaHTTP(id)))
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
	_, port, _ := strings.Cut(n.Addr(), "127.0.0.1:")
	t.Setenv("LOOPID", id)
	t.Setenv("TYPE", "http")
	p := startNode(t, "sn-client.js", port, "act", "fail", "httploop", "httpok")
	got := map[string]senecaResult{}
	for {
		var r senecaResult
		p.next(t, &r)
		if r.Done {
			break
		}
		got[r.Name] = r
	}
	if r := got["act"]; r.Err != nil || r.Res["answer"] != 3.0 {
		t.Errorf("act: got %+v, want answer 3", r)
	}
	// seneca-transport's HTTP client (wreck) rejects any status but 200
	// before reading the body: a Seneca HTTP client sees "Response Error:
	// 500", from a Seneca server as from this one.
	if msg, _ := got["fail"].Err["message"].(string); !strings.Contains(msg, "500") {
		t.Errorf("fail: got %+v, want seneca's HTTP 500 error", got["fail"])
	}
	loop := got["httploop"].Res
	if body, _ := loop["body"].(map[string]any); loop["status"] != 500.0 || body["code"] != "message_loop" {
		t.Errorf("httploop: got %v, want 500 message_loop", loop)
	}
	if diff := cmp.Diff(map[string]any{"status": 200.0, "accept": id, "body": map[string]any{"answer": 2.0, "by": "go"}}, got["httpok"].Res); diff != "" {
		t.Errorf("httpok (-want +got):\n%s", diff)
	}
	testwait.Recv(t, runs)
	testwait.Recv(t, runs)
	select {
	case v := <-runs:
		t.Errorf("the looped request ran (a+b = %v)", v)
	default:
	}
}

// TestGoActsOnSenecaHTTP: a Go caller reaches a real Seneca listen({type:
// 'http'}): an Act and an error (the original unpacked).
func TestGoActsOnSenecaHTTP(t *testing.T) {
	needNode(t, "seneca")
	leak.Check(t)
	t.Setenv("TYPE", "http")
	addr := startSeneca(t, "seneca")
	tr := newTransport(t, microwizard.WithSenecaHTTP(""), microwizard.WithPeer(addr, "role:math,cmd:sum", "role:test,cmd:*"))
	n := callerNode(t, tr, "role:math,cmd:sum")
	res, err := n.Act(t.Context(), "role:math,cmd:sum", map[string]any{"a": 1, "b": 2})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"answer": 3.0, "by": "seneca"}, res.Value()); diff != "" {
		t.Errorf("Act (-want +got):\n%s", diff)
	}
	_, err = n.Act(t.Context(), "role:test,cmd:fail", nil)
	var e *runtime.Error
	if !errors.As(err, &e) || !strings.Contains(e.Message, "bad input from seneca") {
		t.Errorf("fail: got %v, want the Seneca message", err)
	}
	checkSenecaFail(t, err)
}
