package nats_test

import (
	"context"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/natstest"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// TestDrainingNodeAnswersPings: a caller whose call waits on a node that
// is shutting down keeps pinging it (the node answers goaway, not pong)
// and gets the call's answer when the handler ends. The goaway answer to
// a keep-alive ping once failed the connection and lost the call ("server
// is going away"), a call the draining node went on to run.
func TestDrainingNodeAnswersPings(t *testing.T) {
	b := natstest.Start(t)
	started, release := make(chan struct{}, 1), make(chan struct{})
	srv := transporttest.NewServer(t, newTransport(t, b.URL()))
	transporttest.MustAdd(t, srv, "role:slow", func(ctx context.Context, r runtime.Request) (any, error) {
		started <- struct{}{}
		<-release
		return "done", nil
	})
	var once sync.Once
	done := func() { once.Do(func() { close(release) }) }
	t.Cleanup(done) // before the node's own cleanup, which waits for the handler
	cl := transporttest.NewClient(t, newTransport(t, b.URL()), "role:slow", nil, srv.Addr())

	// Count the pings the node's subject carries, beside the node.
	raw, err := natsgo.Connect(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	pings := make(chan struct{}, 64)
	sub, err := raw.Subscribe(srv.Addr(), func(m *natsgo.Msg) {
		for _, f := range rawFrames(t, m.Data) {
			if f.Type == wire.TypePing {
				pings <- struct{}{}
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	answer := make(chan error, 1)
	go func() {
		res, err := cl.Act(t.Context(), "role:slow", nil)
		if err == nil {
			var s string
			if err = res.Decode(&s); err == nil && s != "done" {
				t.Errorf("answer %q", s)
			}
		}
		answer <- err
	}()
	testwait.Recv(t, started)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(ctx) }() // drains until the call ends
	testwait.Until(t, "the node answers pings goaway", func() bool {
		m, err := raw.Request(srv.Addr(), wire.AppendFrame(nil, &wire.Frame{Type: wire.TypePing}), 5*time.Second)
		if err != nil {
			return false
		}
		fs := rawFrames(t, m.Data)
		return len(fs) == 1 && fs[0].Type == wire.TypeGoAway
	})
	for len(pings) > 0 { // the test's own and the caller's before now
		<-pings
	}
	// The caller pings while the call waits (after 250 ms of silence):
	// its next ping is answered goaway; a second one shows that it kept
	// the connection through that answer.
	deadline := time.After(time.Minute)
	for seen := 0; seen < 2; {
		select {
		case <-pings:
			seen++
		case err := <-answer:
			t.Fatalf("the call ended before the handler did: %v", err)
		case <-deadline:
			t.Fatalf("%d pings in a minute", seen)
		}
	}
	done()
	if err := testwait.Recv(t, answer); err != nil {
		t.Fatalf("the call the draining node ran: %v", err)
	}
	if err := testwait.Recv(t, shut); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
