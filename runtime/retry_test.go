package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/runtime/discovery"
)

// lossyPair starts two servers of role:r, a and b, whose calls are lost
// after they ran when net.lose says so, and a client that knows both.
func lossyPair(t *testing.T) (*memNet, *Node) {
	net := newMemNet()
	net.lose = map[string]bool{}
	memNode(t, net, "a", "role:r")
	memNode(t, net, "b", "role:r")
	c, d := memNode(t, net, "c")
	d.host.PeerUp(discovery.Peer{Addr: "a"}) // no digest: fetched at once, no jitter
	d.host.PeerUp(discovery.Peer{Addr: "b"})
	synctest.Wait() // both catalogs are in
	if ps := c.Patterns(); len(ps) != 1 || len(ps[0].Remote) != 2 {
		t.Fatalf("Patterns() = %+v, want role:r at a and b", ps)
	}
	return net, c
}

// TestRetryAfterLossWaitsBackoff: an idempotent call lost after it was
// sent goes to the other target after a jittered backoff of at most 2ms;
// a call that is not idempotent is not sent elsewhere.
func TestRetryAfterLossWaitsBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net, c := lossyPair(t)
		net.mu.Lock()
		net.lose["a"] = true
		net.mu.Unlock()
		// The balancer draws a or b at random until a has lost a call;
		// calls go on until one has gone to a (64 without: a chance of 2^-64).
		for i := 0; i < 64 && (i < 4 || net.count(net.calls, "a") == 0); i++ {
			start := time.Now()
			res, err := c.ActE(t.Context(), "role:r", nil, Idempotent())
			if err != nil || res.Value() != "b" {
				t.Fatalf("idempotent call: %v, %v; want b's answer", res.Value(), err)
			}
			if d := time.Since(start); d > 2*time.Millisecond {
				t.Errorf("the call took %v; the first backoff is at most 2ms", d)
			}
		}
		atA := uint64(net.count(net.calls, "a"))
		if got := c.Stats().Retries; got != atA || atA == 0 {
			t.Errorf("%d retries for %d calls lost at a (want equal, and some)", got, atA)
		}
		var failed int
		for i := 0; i < 64 && failed == 0; i++ {
			// a's lost calls made the balancer avoid it; long enough
			// without them, it is a's turn again.
			time.Sleep(30 * time.Second)
			if _, err := c.ActE(t.Context(), "role:r", nil); err != nil {
				failed++
				if CodeOf(err) != CodeDeadlineExceeded {
					// It waits for a within its deadline, to send it again.
					t.Errorf("non-idempotent call lost at a: %v, want deadline_exceeded", err)
				}
			}
		}
		if lostAtA := net.count(net.calls, "a") - int(atA); failed != lostAtA || lostAtA == 0 {
			t.Errorf("%d non-idempotent calls failed, %d were lost at a: want equal, and some (a lost call is not sent elsewhere)", failed, lostAtA)
		}
	})
}

// TestRetryBudget: when every target loses calls, idempotent retries stop
// once the budget (ten, plus a tenth per call) is spent.
func TestRetryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net, c := lossyPair(t)
		net.mu.Lock()
		net.lose["a"], net.lose["b"] = true, true
		net.mu.Unlock()
		const calls = 40
		spent := 0
		for range calls {
			_, err := c.ActE(t.Context(), "role:r", nil, Idempotent())
			if err == nil {
				t.Fatal("a call succeeded; every target loses them")
			}
			if strings.Contains(err.Error(), "retry budget spent") {
				spent++
			}
		}
		retries := c.Stats().Retries
		// Ten at first, then one per ten calls.
		if max := uint64(10 + calls/10); retries > max || retries < 10 {
			t.Errorf("%d retries in %d calls, want between 10 and %d", retries, calls, max)
		}
		if spent == 0 {
			t.Error("no call says the retry budget is spent")
		}
		t.Logf("%d retries, %d calls stopped by the budget", retries, spent)
	})
}

// TestBackoffBoundedByDeadline: the backoff never outlives the caller's
// deadline.
func TestBackoffBoundedByDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, err := New()
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		start := time.Now()
		for attempt := 0; retryBackoff(ctx, attempt); attempt++ {
		}
		if d := time.Since(start); d < 10*time.Millisecond || d > 10*time.Millisecond+time.Microsecond {
			t.Errorf("backoff ended after %v, want the 10ms deadline", d)
		}
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Errorf("ctx: %v", ctx.Err())
		}
	})
}

// TestRetryAfterStall: an idempotent call given up on a stalled connection
// (the transport's error says Stalled, as runtime/tcp's does when
// keep-alive finds the peer's answers not coming though its host took the
// call) goes to another target; with no other target it goes to the same
// peer again, whose connection stayed, rather than fail.
func TestRetryAfterStall(t *testing.T) {
	t.Run("other target", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			net, c := lossyPair(t)
			net.mu.Lock()
			net.stall = map[string]int{"a": 1}
			net.mu.Unlock()
			// Calls go on until one has gone to a (64 without: a chance of 2^-64).
			for i := 0; i < 64 && net.count(net.calls, "a") == 0; i++ {
				res, err := c.ActE(t.Context(), "role:r", nil, Idempotent())
				if err != nil || res.Value() != "b" {
					t.Fatalf("idempotent call: %v, %v; want b's answer", res.Value(), err)
				}
			}
			if got := c.Stats().Retries; got != 1 {
				t.Errorf("%d retries, want 1: the call given up at a", got)
			}
		})
	})
	t.Run("same peer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			net := newMemNet()
			net.stall = map[string]int{"a": 1}
			memNode(t, net, "a", "role:r")
			c, d := memNode(t, net, "c")
			d.host.PeerUp(discovery.Peer{Addr: "a"})
			synctest.Wait()
			res, err := c.ActE(t.Context(), "role:r", nil, Idempotent())
			if err != nil || res.Value() != "a" {
				t.Fatalf("idempotent call: %v, %v; want a's answer", res.Value(), err)
			}
			if got := net.count(net.calls, "a"); got != 2 {
				t.Errorf("a got the call %d times, want 2: given up once, then sent again", got)
			}
			// A call lost at the only peer (its connection gone) is not
			// sent there again: the second try is for a connection that
			// stays.
			net.mu.Lock()
			net.lose = map[string]bool{"a": true}
			net.mu.Unlock()
			if _, err := c.ActE(t.Context(), "role:r", nil, Idempotent()); err == nil {
				t.Error("idempotent call lost at the only peer: nil error, want one")
			}
			if got := net.count(net.calls, "a"); got != 3 {
				t.Errorf("a got calls %d times in all, want 3: the lost call once", got)
			}
		})
	})
}
