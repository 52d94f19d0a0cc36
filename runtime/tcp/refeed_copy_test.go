package tcp_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/link"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
)

// laterConnsFail dials through tr; every connection to addr after the
// first answers calls of pattern with fail instead of sending them (the
// catalog goes through).
type laterConnsFail struct {
	runtime.Transport
	addr, pattern string
	fail          func() (*runtime.Message, error)
	mu            sync.Mutex
	dials         int
}

func (u *laterConnsFail) Dial(ctx context.Context, addr string) (runtime.Conn, error) {
	c, err := u.Transport.Dial(ctx, addr)
	if err != nil || addr != u.addr {
		return c, err
	}
	u.mu.Lock()
	u.dials++
	later := u.dials > 1
	u.mu.Unlock()
	if !later {
		return c, nil
	}
	return failingConn{c, u.pattern, u.fail}, nil
}

type failingConn struct {
	runtime.Conn
	pattern string
	fail    func() (*runtime.Message, error)
}

func (c failingConn) Call(ctx context.Context, m *runtime.Message) (*runtime.Message, error) {
	if m.Pattern == c.pattern {
		return c.fail()
	}
	return c.Conn.Call(ctx, m)
}

// TestRefeedCopyFailsIsLost: a call whose connection drops after it was
// written is sent again on the peer's new connection; when that copy
// fails without running — not sent (a broker connection that ended at
// once), or refused unrun (its original may still hold the caller's share
// of the in-flight limit there) — the call is lost (it may have run):
// never "not sent" or refused, so it must not go to another peer and run
// twice. (Before, each of these sent it on to the other server, which ran
// it too.)
func TestRefeedCopyFailsIsLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func() (*runtime.Message, error)
	}{
		{"unsent", func() (*runtime.Message, error) {
			return nil, fmt.Errorf("%w: the connection ended at once", runtime.ErrNotSent)
		}},
		{"refused", func() (*runtime.Message, error) {
			return &runtime.Message{Code: runtime.CodeResourceExhausted, Error: "over the caller's share", Flags: runtime.FlagRefused}, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { testRefeedCopyFails(t, tc.fail) })
	}
}

func testRefeedCopyFails(t *testing.T, fail func() (*runtime.Message, error)) {
	pattern := "cmd:pay,role:bank"
	var ranA, ranB atomic.Int64
	started, release := make(chan struct{}, 1), make(chan struct{})
	a := newServer(t)
	transporttest.MustAdd(t, a, "role:bank,cmd:pay", func(ctx context.Context, r runtime.Request) (any, error) {
		ranA.Add(1)
		started <- struct{}{}
		<-release
		return map[string]any{"by": "a"}, nil
	})
	b := newServer(t)
	transporttest.MustAdd(t, b, "role:bank,cmd:pay", func(ctx context.Context, r runtime.Request) (any, error) {
		ranB.Add(1)
		return map[string]any{"by": "b"}, nil
	})
	proxy := link.NewTCP(t, a.Addr())
	tr := &laterConnsFail{Transport: newTransport(t), addr: proxy.Addr(), pattern: pattern, fail: fail}
	cl := transporttest.NewClient(t, tr, "role:bank,cmd:pay", nil, proxy.Addr(), b.Addr())
	testwait.Until(t, "both servers are targets", func() bool {
		ts, _, _ := cl.Route("role:bank,cmd:pay")
		return len(ts.Targets) == 2
	})
	defer close(release)
	// Calls until one reaches a (the balancer draws at random).
	for i := 0; ; i++ {
		if i == 64 {
			t.Fatal("no call reached a in 64")
		}
		before := ranB.Load()
		done := make(chan error, 1)
		go func() { _, err := cl.ActE(t.Context(), "role:bank,cmd:pay", nil); done <- err }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			continue // b answered it
		case <-started:
		}
		proxy.Cut() // lost after it was written; the refed copy fails unrun
		err := <-done
		if err == nil || errors.Is(err, runtime.ErrNotSent) || runtime.CodeOf(err) != runtime.CodeUnavailable {
			t.Errorf("call %d: %v; want unavailable, not matching ErrNotSent (it may have run)", i, err)
		}
		if n := ranB.Load() - before; n != 0 {
			t.Errorf("the call that ran at a ran at b too (%d times)", n)
		}
		return
	}
}
