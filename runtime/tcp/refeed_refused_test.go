package tcp_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/transporttest"
)

// refusedAfterFirst dials through tr; every connection to addr after the
// first refuses calls of pattern without running them (flagged refused,
// as over the in-flight limit), as a transport does with a copy of a call
// whose original still holds the caller's share of the limit.
type refusedAfterFirst struct {
	runtime.Transport
	addr, pattern string
	mu            sync.Mutex
	dials         int
}

func (u *refusedAfterFirst) Dial(ctx context.Context, addr string) (runtime.Conn, error) {
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
	return refusedConn{c, u.pattern}, nil
}

type refusedConn struct {
	runtime.Conn
	pattern string
}

func (c refusedConn) Call(ctx context.Context, m *runtime.Message) (*runtime.Message, error) {
	if m.Pattern == c.pattern {
		return &runtime.Message{Code: runtime.CodeResourceExhausted, Error: "over the caller's share", Flags: runtime.FlagRefused}, nil
	}
	return c.Conn.Call(ctx, m)
}

// TestRefeedRefusedIsLost: a call whose connection drops after it was
// written is sent again on the new connection; when that copy is refused
// unrun (the original may still be running there), the call is lost (it
// may have run), never refused: it must not go to another peer and run
// twice. (Before, the refusal sent it on to the other server, which ran
// it too.)
func TestRefeedRefusedIsLost(t *testing.T) {
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
	proxy := newCutProxy(t, a.Addr())
	tr := &refusedAfterFirst{Transport: newTransport(t), addr: proxy.Addr(), pattern: pattern}
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
		proxy.cut() // lost after it was written; the refed copy is refused
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
