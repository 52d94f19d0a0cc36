package microwizard_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/leak"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/microwizard"
)

// TestSenecaHTTPNoReplyDoesNotWait: a no-reply call over Seneca's HTTP
// wire returns once its request is written, while the handler still
// runs (as seneca-transport's HTTP client goes on with sync false);
// before, it waited for the HTTP answer, so for the handler. The calls
// left waiting for their answers are bounded (WithMaxPending): one more
// is not sent. The answers still to come end with the node.
func TestSenecaHTTPNoReplyDoesNotWait(t *testing.T) {
	leak.Check(t)
	srv := newNode(t, newTransport(t, microwizard.WithSenecaHTTP("srv"), microwizard.WithServeTimeout(3*time.Second)))
	started := make(chan float64, 4)
	release := make(chan struct{})
	var returned atomic.Bool
	mustAdd(t, srv, "role:note,cmd:put", func(ctx context.Context, req runtime.Request) (any, error) {
		v, _ := req.Float64("v")
		started <- v
		select {
		case <-release:
		case <-ctx.Done():
		}
		returned.Store(true)
		return map[string]any{}, nil
	})
	mustAdd(t, srv, "role:note,cmd:ping", func(ctx context.Context, req runtime.Request) (any, error) { return map[string]any{}, nil })
	tr := newTransport(t, microwizard.WithSenecaHTTP("caller"), microwizard.WithMaxPending(1), microwizard.WithPeer(srv.Addr(), "role:note,cmd:put", "role:note,cmd:ping"))
	n := callerNode(t, tr, "role:note,cmd:ping")

	done := make(chan error, 1)
	go func() {
		_, err := n.Act(t.Context(), "role:note,cmd:put", map[string]any{"v": 1}, runtime.NoReply())
		done <- err
	}()
	if v := testwait.Recv(t, started); v != 1 {
		t.Errorf("the handler got v=%v, want 1", v)
	}
	if err := testwait.Recv(t, done); err != nil {
		t.Errorf("the no-reply call: %v", err)
	}
	if returned.Load() {
		t.Error("the no-reply call returned after the handler: it waited for the answer")
	}
	// The one slot is taken until the first call's answer comes.
	_, err := n.Act(t.Context(), "role:note,cmd:put", map[string]any{"v": 2}, runtime.NoReply())
	if !errors.Is(err, runtime.ErrNotSent) {
		t.Errorf("a no-reply call over the bound: got %v, want not sent", err)
	}
	close(release)
	testwait.Until(t, "the slot is free once the answer came", func() bool {
		_, err := n.Act(t.Context(), "role:note,cmd:put", map[string]any{"v": 3}, runtime.NoReply())
		return err == nil
	})
	if v := testwait.Recv(t, started); v != 3 {
		t.Errorf("the handler got v=%v, want 3 (2 was not sent)", v)
	}
}
