package microwizard_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/microwizard"
)

// senecaOption is WithSeneca(id) for typ "tcp", WithSenecaHTTP(id) for
// "http".
func senecaOption(typ, id string) microwizard.Option {
	if typ == "http" {
		return microwizard.WithSenecaHTTP(id)
	}
	return microwizard.WithSeneca(id)
}

// TestSenecaLoopAcrossHops: a loop that closes two hops after a Go
// handler is refused where it closes, as Seneca refuses it. A Go caller
// acts on a real Seneca node A, whose handler forwards its message to a
// Go handler (with the track [A]: see sn-loop.js), which calls A again
// with its ctx: that call carries the track it came with plus the Go
// node's id, so A refuses it as a message loop (over TCP unanswered, so
// the Go call times out; over HTTP 500 message_loop) and A's handler
// runs once. Before, the Go node sent a track of its own id alone: A
// served the call again.
func TestSenecaLoopAcrossHops(t *testing.T) {
	needNode(t, "seneca")
	for _, typ := range []string{"tcp", "http"} {
		t.Run(typ, func(t *testing.T) {
			leak.Check(t)
			t.Setenv("TYPE", typ)
			p := startNode(t, "sn-loop.js")
			var ready struct {
				Port int
				ID   string
			}
			p.next(t, &ready)
			a := "127.0.0.1:" + strconv.Itoa(ready.Port)

			gtr := newTransport(t, senecaOption(typ, "go-loop"), microwizard.WithPeer(a, "role:loop,cmd:*"))
			g := newNode(t, gtr, runtime.WithDiscovery(gtr.Discovery()))
			tracks := make(chan []string, 4)
			onward := make(chan error, 4)
			mustAdd(t, g, "role:go,cmd:loop", func(ctx context.Context, req runtime.Request) (any, error) {
				tracks <- slices.Clone(microwizard.Track(ctx))
				_, err := g.Act(ctx, "role:loop,cmd:node", map[string]any{"hop": 3}, runtime.Timeout(time.Second))
				onward <- err
				return nil, err
			})
			_, port, _ := strings.Cut(g.Addr(), "127.0.0.1:")
			fmt.Fprintln(p.stdin, port)
			var up struct{ Ready bool }
			p.next(t, &up)

			ctr := newTransport(t, senecaOption(typ, "go-caller"), microwizard.WithPeer(a, "role:loop,cmd:*"))
			c := callerNode(t, ctr, "role:loop,cmd:count")
			// Over HTTP, A does not answer this call once its onward call
			// got a 500 (seen with a plain Node.js HTTP server as well as
			// with this Go node): it ends by its timeout.
			_, err := c.Act(t.Context(), "role:loop,cmd:node", map[string]any{"hop": 1}, runtime.Timeout(4*time.Second))
			if err == nil {
				t.Error("the call whose loop was refused succeeded")
			}
			select {
			case tr := <-tracks:
				if !slices.Equal(tr, []string{ready.ID}) {
					t.Errorf("the Go handler saw the track %q, want [%s] (A's id)", tr, ready.ID)
				}
			default:
				t.Fatal("the Go handler did not run")
			}
			oerr := testwait.Recv(t, onward)
			switch typ {
			case "tcp":
				if runtime.CodeOf(oerr) != runtime.CodeDeadlineExceeded {
					t.Errorf("the looped call over TCP: got %v, want no answer (deadline exceeded), as Seneca answers none", oerr)
				}
			case "http":
				if !strings.Contains(fmt.Sprint(oerr), "looping back") {
					t.Errorf("the looped call over HTTP: got %v, want Seneca's message_loop", oerr)
				}
			}
			res, err := c.Act(t.Context(), "role:loop,cmd:count", nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Value().(map[string]any); got["runs"] != 1.0 {
				t.Errorf("A's handler ran %v times (tracks %v), want once: the looped call was served", got["runs"], got["tracks"])
			}
		})
	}
}

// TestSenecaLoopGoOnly: the same between Go nodes alone (no Node.js
// needed): C → G1 → G2 → G1 is refused at G1, whose handler runs once.
func TestSenecaLoopGoOnly(t *testing.T) {
	leak.Check(t)
	g2tr := newTransport(t, microwizard.WithSeneca("g2"))
	g2 := newNode(t, g2tr)
	// Pins without globs: with g1's own cmd:in and cmd:ping, a glob pin
	// role:g2,cmd:* would not be found for cmd:in (exact beats glob at
	// the same key, as in Seneca's patrun).
	g1tr := newTransport(t, microwizard.WithSeneca("g1"), microwizard.WithPeer(g2.Addr(), "role:g2,cmd:in", "role:g2,cmd:ping"))
	g1 := newNode(t, g1tr, runtime.WithDiscovery(g1tr.Discovery()))
	ping := func(ctx context.Context, req runtime.Request) (any, error) { return map[string]any{}, nil }
	mustAdd(t, g1, "role:g1,cmd:ping", ping)
	mustAdd(t, g2, "role:g2,cmd:ping", ping)
	runs := make(chan []string, 8)
	mustAdd(t, g1, "role:g1,cmd:in", func(ctx context.Context, req runtime.Request) (any, error) {
		runs <- slices.Clone(microwizard.Track(ctx))
		return g1.Act(ctx, "role:g2,cmd:in", nil, runtime.Timeout(5*time.Second))
	})
	back := make(chan error, 8)
	// g2 calls g1 through a node of its own whose transport has g1's
	// address: a node with g2's id, as g2's own calls would carry it.
	g2out := newTransport(t, microwizard.WithSeneca("g2"), microwizard.WithPeer(g1.Addr(), "role:g1,cmd:*"))
	g2c := newNode(t, g2out, runtime.WithDiscovery(g2out.Discovery()))
	testwait.Until(t, "g2's caller routes g1's pins", func() bool {
		_, err := g2c.Act(t.Context(), "role:g1,cmd:ping", nil)
		return err == nil
	})
	mustAdd(t, g2, "role:g2,cmd:in", func(ctx context.Context, req runtime.Request) (any, error) {
		_, err := g2c.Act(ctx, "role:g1,cmd:in", nil, runtime.Timeout(300*time.Millisecond))
		back <- err
		return nil, err
	})
	ctr := newTransport(t, microwizard.WithSeneca("c"), microwizard.WithPeer(g1.Addr(), "role:g1,cmd:*"))
	c := callerNode(t, ctr, "role:g1,cmd:ping")
	testwait.Until(t, "g1 routes g2's pins", func() bool {
		_, err := g1.Act(t.Context(), "role:g2,cmd:ping", nil)
		return err == nil
	})
	if _, err := c.Act(t.Context(), "role:g1,cmd:in", nil, runtime.Timeout(10*time.Second)); err == nil {
		t.Error("the call whose loop was refused succeeded")
	}
	if tr := testwait.Recv(t, runs); !slices.Equal(tr, []string{"c"}) {
		t.Errorf("g1's handler saw the track %q, want [c]", tr)
	}
	if err := testwait.Recv(t, back); runtime.CodeOf(err) != runtime.CodeDeadlineExceeded {
		t.Errorf("g2's call back to g1: got %v, want no answer (deadline exceeded)", err)
	}
	select {
	case tr := <-runs:
		t.Errorf("g1's handler ran again, with the track %q: the loop was served", tr)
	default:
	}
}
