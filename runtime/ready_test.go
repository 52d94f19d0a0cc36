package runtime

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/runtime/discovery"
)

// TestWaitForReadyWaitsForPeer: while the only peer a node knows cannot
// be reached, a call fails at once as unavailable, a WaitForReady call
// waits until its deadline and fails with the deadline's code, and one
// with a longer deadline succeeds once the peer serves. A pattern no
// peer serves, all of them reachable, fails at once as not found; a call
// waiting for an unreachable peer ends when its node closes.
func TestWaitForReadyWaitsForPeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newMemNet()
		c, d := memNode(t, net, "c")
		d.host.PeerUp(discovery.Peer{Addr: "x"})
		synctest.Wait()

		start := time.Now()
		_, err := c.ActE(t.Context(), "role:r", nil, Idempotent())
		if CodeOf(err) != CodeUnavailable || time.Since(start) != 0 {
			t.Errorf("a call without WaitForReady: %v after %v; want unavailable at once", err, time.Since(start))
		}
		_, err = c.ActE(t.Context(), "role:r", nil, WaitForReady(), Timeout(time.Second))
		if CodeOf(err) != CodeDeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Errorf("a WaitForReady call with a 1s timeout: %v after %v; want deadline exceeded after 1s", err, time.Since(start))
		}

		type answer struct {
			v   any
			err error
		}
		answers := make(chan answer, 1)
		go func() {
			res, err := c.ActE(t.Context(), "role:r", nil, WaitForReady(), Timeout(2*time.Minute))
			answers <- answer{res.Value(), err}
		}()
		synctest.Wait()
		time.Sleep(3 * time.Second)
		select {
		case a := <-answers:
			t.Fatalf("the call returned %v, %v while no peer served it", a.v, a.err)
		default:
		}
		memNode(t, net, "x", "role:r")
		if a := <-answers; a.err != nil || a.v != "x" {
			t.Errorf("the waiting call: %v, %v; want x's answer", a.v, a.err)
		}
		if w := c.Stats().ReadyWaits; w != 2 {
			t.Errorf("ReadyWaits = %d, want 2", w)
		}

		_, err = c.ActE(t.Context(), "role:none", nil, WaitForReady())
		if !errors.Is(err, ErrNoHandler) {
			t.Errorf("a WaitForReady call no reachable peer serves: %v; want not found at once", err)
		}
		d.host.PeerUp(discovery.Peer{Addr: "y"}) // unreachable: role:none may be there
		synctest.Wait()
		errs := make(chan error, 1)
		go func() {
			_, err := c.ActE(context.Background(), "role:none", nil, WaitForReady(), Timeout(time.Hour))
			errs <- err
		}()
		synctest.Wait()
		c.Close()
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Errorf("a waiting call when its node closes: %v; want an error that matches ErrClosed", err)
		}
	})
}

// TestWaitForReadyLostRunsAtMostOnce: when every target loses calls after
// they ran, a WaitForReady call that is not idempotent runs once and fails
// as unavailable (it may have run: it is not made again), and idempotent
// ones run again only within the retry budget, then fail.
func TestWaitForReadyLostRunsAtMostOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net, c := lossyPair(t)
		net.mu.Lock()
		net.lose["a"], net.lose["b"] = true, true
		net.mu.Unlock()
		runs := func() int { return net.count(net.calls, "a") + net.count(net.calls, "b") }

		_, err := c.ActE(t.Context(), "role:r", nil, WaitForReady())
		if CodeOf(err) != CodeDeadlineExceeded {
			// It waits for its peer within its deadline, to send it again.
			t.Errorf("a lost call that is not idempotent: %v; want deadline_exceeded", err)
		}
		if n := runs(); n != 1 {
			t.Errorf("a lost call that is not idempotent ran %d times, want once", n)
		}

		const calls = 40
		for range calls {
			if _, err := c.ActE(t.Context(), "role:r", nil, Idempotent(), WaitForReady()); CodeOf(err) != CodeUnavailable {
				t.Fatalf("an idempotent call every target loses: %v; want unavailable", err)
			}
		}
		// One run each, and runs again within the budget: ten, plus a
		// tenth per try.
		if n := runs() - 1; n < calls || n > calls+10+calls/5 {
			t.Errorf("%d idempotent calls ran %d times, want between %d and %d", calls, n, calls, calls+10+calls/5)
		}
	})
}
