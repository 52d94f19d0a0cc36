package microwizard_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testpb"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/microwizard"
)

// startServer runs mw-server.mjs (its handlers answer with by) and
// returns its address.
func startServer(t *testing.T, by string) string {
	t.Helper()
	p := startNode(t, "mw-server.mjs", by)
	var ready struct{ Port int }
	p.next(t, &ready)
	return "127.0.0.1:" + strconv.Itoa(ready.Port)
}

// callerNode returns a node that calls the peers of tr, once it routes
// pattern.
func callerNode(t *testing.T, tr *microwizard.Transport, pattern string) *runtime.Node {
	t.Helper()
	n := newNode(t, tr, runtime.WithDiscovery(tr.Discovery()))
	testwait.Until(t, "the caller routes "+pattern, func() bool {
		_, err := n.Act(t.Context(), pattern, map[string]any{"a": 0, "b": 0})
		return err == nil
	})
	return n
}

// TestGoActsOnMicroWizard: a Go caller reaches a real MicroWizard
// listen({type: 'tcp'}) through the pins given for its address: Act with
// a map, ActE, a typed call, an error (message, name, code kept), a
// timeout, a no-reply call.
func TestGoActsOnMicroWizard(t *testing.T) {
	needNode(t, "microwizard")
	leak.Check(t)
	addr := startServer(t, "node")
	tr := newTransport(t, microwizard.WithPeer(addr, "role:math,cmd:sum", "role:test,cmd:echo", "role:test,cmd:*", "role:glob,cmd:*"))
	n := callerNode(t, tr, "role:math,cmd:sum")
	ctx := t.Context()

	res, err := n.Act(ctx, "role:math,cmd:sum", map[string]any{"a": 1, "b": 2})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"answer": 3.0, "by": "node"}, res.Value()); diff != "" {
		t.Errorf("Act (-want +got):\n%s", diff)
	}
	res, err = n.ActE(ctx, "role:test,cmd:echo", map[string]any{"x": "y"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"got": map[string]any{"x": "y"}}, res.Value()); diff != "" {
		t.Errorf("ActE goes as actE: the handler gets the data alone (-want +got):\n%s", diff)
	}
	// Under a glob pin, an ActE goes as actE with its own pattern as p,
	// as MicroWizard's client sends it; before, it was refused because
	// the data lacks cmd.
	res, err = n.ActE(ctx, "role:glob,cmd:two", map[string]any{"x": "y"})
	if err != nil {
		t.Fatalf("ActE under a glob pin: %v", err)
	}
	if diff := cmp.Diff(map[string]any{"which": "two", "got": map[string]any{"x": "y"}}, res.Value()); diff != "" {
		t.Errorf("ActE under a glob pin reaches the handler of its pattern with the data alone (-want +got):\n%s", diff)
	}
	res, err = n.ActE(ctx, "role:glob", map[string]any{"cmd": "one", "x": 1}, runtime.Mixin("cmd"))
	if err != nil {
		t.Fatalf("ActE with a mixin under a glob pin: %v", err)
	}
	if which, _ := res.Value().(map[string]any)["which"].(string); which != "one" {
		t.Errorf("ActE with Mixin(cmd) under a glob pin: got %v, want the handler of cmd:one", res.Value())
	}
	res, err = n.Act(ctx, "role:test,cmd:echo", &testpb.SumRequest{Values: []float64{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"got": map[string]any{"values": []any{1.0, 2.0}, "cmd": "echo", "role": "test"}}, res.Value()); diff != "" {
		t.Errorf("Act with a protobuf message goes as its JSON form, overlaid (-want +got):\n%s", diff)
	}

	_, err = n.Act(ctx, "role:test,cmd:fail", nil)
	var e *runtime.Error
	if !errors.As(err, &e) || e.Code != runtime.CodeInvalidArgument || e.Message != "bad input from node" || microwizard.ErrorName(err) != "TypeError" {
		t.Errorf("fail: got %v (code %v, name %q), want invalid_argument \"bad input from node\" named TypeError", err, runtime.CodeOf(err), microwizard.ErrorName(err))
	}

	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := n.Act(tctx, "role:test,cmd:slow", nil); runtime.CodeOf(err) != runtime.CodeDeadlineExceeded {
		t.Errorf("slow: got %v, want deadline_exceeded", err)
	}
	if _, err := n.Act(ctx, "role:test,cmd:echo", nil, runtime.NoReply()); err != nil {
		t.Errorf("no-reply: %v", err)
	}
	// The connection still serves after all that.
	if _, err := n.Act(ctx, "role:math,cmd:sum", map[string]any{"a": 2, "b": 2}); err != nil {
		t.Errorf("after: %v", err)
	}
}

// TestMixedMesh: one pattern served by a MicroWizard node and by a Go
// node at once; the Go caller's calls reach both.
func TestMixedMesh(t *testing.T) {
	needNode(t, "microwizard")
	leak.Check(t)
	nodeAddr := startServer(t, "node")
	goServer := newNode(t, newTransport(t))
	mustAdd(t, goServer, "role:mesh,cmd:who", func(ctx context.Context, req runtime.Request) (any, error) {
		return map[string]any{"by": "go"}, nil
	})
	tr := newTransport(t, microwizard.WithPeer(nodeAddr, "role:mesh,cmd:who"), microwizard.WithPeer(goServer.Addr(), "role:mesh,cmd:who"))
	n := newNode(t, tr, runtime.WithDiscovery(tr.Discovery()))
	seen := map[string]int{}
	testwait.Until(t, "calls reach the Go node and the MicroWizard node", func() bool {
		res, err := n.Act(t.Context(), "role:mesh,cmd:who", nil)
		if err == nil {
			by, _ := res.Value().(map[string]any)["by"].(string)
			seen[by]++
		}
		return seen["go"] > 0 && seen["node"] > 0
	})
}

// TestOverloadAnswerMovesOn: a node answering retry_later_err_overload
// (as a closing MicroWizard does) is a refusal: the caller's calls go to
// the other node serving the pattern, and none fails.
func TestOverloadAnswerMovesOn(t *testing.T) {
	needNode(t, "microwizard")
	leak.Check(t)
	nodeAddr := startServer(t, "node")
	var refused atomic.Int32
	closing := fakeServer(t, func(id string) string {
		refused.Add(1)
		return `{"id":"` + id + `","k":"res","sync":true,"error":{"message":"retry_later_err_overload","name":"Error"}}`
	})
	tr := newTransport(t, microwizard.WithPeer(closing, "role:mesh,cmd:who"), microwizard.WithPeer(nodeAddr, "role:mesh,cmd:who"))
	n := newNode(t, tr, runtime.WithDiscovery(tr.Discovery()))
	testwait.Until(t, "the caller reaches the MicroWizard node", func() bool {
		_, err := n.Act(t.Context(), "role:mesh,cmd:who", nil)
		return err == nil
	})
	for i := range 20 {
		res, err := n.Act(t.Context(), "role:mesh,cmd:who", nil)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if by := res.Value().(map[string]any)["by"]; by != "node" {
			t.Fatalf("call %d answered by %v", i, by)
		}
	}
	if refused.Load() == 0 {
		t.Error("the closing node was never tried: the test proves nothing")
	}
}

// fakeServer listens on 127.0.0.1 and answers each request line with
// answer(id); it returns the address.
func fakeServer(t *testing.T, answer func(id string) string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() {
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					var in struct{ ID string }
					if jsonUnmarshal(sc.Bytes(), &in) != nil || in.ID == "" {
						continue
					}
					c.Write([]byte(answer(in.ID) + "\n"))
				}
			}()
		}
	}()
	return ln.Addr().String()
}
