package runtime

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wizardmesh/wizard/runtime/discovery"
	"github.com/wizardmesh/wizard/runtime/introspect"
)

// TestUnansweredAddressNotStormed: an address discovery announces that
// never answers is dialled ever more slowly, given up after
// unansweredDials attempts while discovery repeats itself, and tried once
// more (after the backoff) when discovery reports another run there.
func TestUnansweredAddressNotStormed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newMemNet()
		c, d := memNode(t, net, "c")
		claim := discovery.Peer{ID: "h", Instance: "x", Addr: "nowhere", Digest: "AAAAAAAAAAAAAAAAAAAAAA"}
		d.host.PeerUp(claim)
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		given := net.count(net.attempts, "nowhere")
		if given > unansweredDials {
			t.Fatalf("%d dials in 10 minutes to an address that never answered, want at most %d", given, unansweredDials)
		}
		if given < unansweredDials {
			t.Errorf("%d dials in 10 minutes, want %d before giving up", given, unansweredDials)
		}
		// Given up: discovery repeating itself (a suspicion change) dials
		// nothing.
		claim.Suspect = true
		d.host.PeerUp(claim)
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := net.count(net.attempts, "nowhere"); got != given {
			t.Errorf("%d dials after giving up", got-given)
		}
		if ms := c.Members(); len(ms) != 2 || ms[1].Connected {
			t.Errorf("Members() = %+v: want the given-up peer listed, not connected", ms)
		}
		// Another run there: one dial, after the backoff, then given up again.
		claim.Instance = "y"
		d.host.PeerUp(claim)
		synctest.Wait()
		if got := net.count(net.attempts, "nowhere"); got != given {
			t.Errorf("a new run was dialled before the backoff")
		}
		time.Sleep(maxUnansweredBackoff)
		synctest.Wait()
		if got := net.count(net.attempts, "nowhere"); got != given+1 {
			t.Errorf("%d dials after discovery reported another run, want 1", got-given)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := net.count(net.attempts, "nowhere"); got != given+1 {
			t.Errorf("%d dials an hour after another run was reported, want 1", got-given)
		}
		// When it answers at last, as announced, it is routed.
		n, _ := memNode(t, net, "nowhere", "role:late")
		claim.ID, claim.Instance, claim.Digest = n.id, n.instance, n.digest()
		d.host.PeerUp(claim)
		time.Sleep(maxUnansweredBackoff)
		synctest.Wait()
		waitRoute(t, c, "role:late", "nowhere")
	})
}

// TestStaticPeerNotGivenUp: a static peer (no gossip names it) that does
// not answer is dialled ever more slowly, up to once a minute, and never
// given up: it is routed a minute at most after it starts.
func TestStaticPeerNotGivenUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newMemNet()
		c, d := memNode(t, net, "c")
		d.host.PeerUp(discovery.Peer{Addr: "later"})
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		// About a minute of doubling from 20 ms, then once a minute at
		// most (with jitter, half a minute at least).
		const most = unansweredDials + 20
		if got := net.count(net.attempts, "later"); got > most {
			t.Fatalf("%d dials in 10 minutes to a static peer that does not answer, want at most %d", got, most)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		before := net.count(net.attempts, "later")
		memNode(t, net, "later", "role:late")
		time.Sleep(maxUnansweredBackoff)
		synctest.Wait()
		waitRoute(t, c, "role:late", "later")
		if got := net.count(net.attempts, "later") - before; got != 1 {
			t.Errorf("%d dials to connect once it listened, want 1", got)
		}
	})
}

// TestStaticPeerBackSoon: a static peer that answered, then was away
// for an hour (a partition, a long restart), is routed again within
// maxAnsweredBackoff of its return; meanwhile it is dialled at most every
// few seconds.
func TestStaticPeerBackSoon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newMemNet()
		s, _ := memNode(t, net, "s", "role:r")
		c, d := memNode(t, net, "c")
		d.host.PeerUp(discovery.Peer{Addr: "s"})
		synctest.Wait()
		waitRoute(t, c, "role:r", "s")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		before := net.count(net.attempts, "s")
		time.Sleep(time.Hour)
		synctest.Wait()
		if got, most := net.count(net.attempts, "s")-before, unansweredDials+int(time.Hour/(maxAnsweredBackoff/2)); got > most {
			t.Errorf("%d dials in an hour away, want at most %d", got, most)
		}
		memNode(t, net, "s", "role:r")
		back := time.Now()
		for !routes(c, "role:r") && time.Since(back) < time.Hour {
			time.Sleep(100 * time.Millisecond)
		}
		if d := time.Since(back); d > maxAnsweredBackoff {
			t.Errorf("routed %v after its return, want within %v", d, maxAnsweredBackoff)
		}
	})
}

// routes reports whether n routes pattern to a peer.
func routes(n *Node, pattern string) bool {
	for _, pi := range n.Patterns() {
		if pi.Pattern.String() == pattern && len(pi.Remote) > 0 {
			return true
		}
	}
	return false
}

// holdNet is a transport whose dials hang until their context ends, as to
// an address that drops packets; it records how many are under way.
type holdNet struct {
	mu       sync.Mutex
	inFlight int
	most     int
	dials    int
	noLimit  int             // dials whose context had no deadline
	limits   []time.Duration // the others' time left as they started
}

func (h *holdNet) Name() string { return "hold" }
func (h *holdNet) Listen(string, Server) (Listener, error) {
	return nil, fmt.Errorf("hold: no listening")
}
func (h *holdNet) Dial(ctx context.Context, addr string) (Conn, error) {
	h.mu.Lock()
	h.inFlight++
	h.dials++
	h.most = max(h.most, h.inFlight)
	if dl, ok := ctx.Deadline(); !ok {
		h.noLimit++
	} else {
		h.limits = append(h.limits, time.Until(dl))
	}
	h.mu.Unlock()
	<-ctx.Done()
	h.mu.Lock()
	h.inFlight--
	h.mu.Unlock()
	return nil, fmt.Errorf("%w: %s: %w", ErrNotSent, addr, ctx.Err())
}

// TestConcurrentDialsBounded: dials to addresses that do not answer are
// bounded in number at once ([WithMaxDials]) and each ends with its
// timeout, so that they cannot hold the node's dialling up.
func TestConcurrentDialsBounded(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []Option
		want int
	}{
		{"default", nil, defaultMaxDials},
		{"WithMaxDials(3)", []Option{WithMaxDials(3)}, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := &holdNet{}
				d := &hostDiscovery{}
				n, err := New(append([]Option{WithTransport(tr), WithDiscovery(d)}, tt.opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				defer n.Close()
				for i := range 100 {
					d.host.PeerUp(discovery.Peer{ID: fmt.Sprint(i), Addr: fmt.Sprintf("10.0.0.%d:1", i)})
				}
				synctest.Wait()
				tr.mu.Lock()
				inFlight := tr.inFlight
				tr.mu.Unlock()
				if inFlight != tt.want {
					t.Errorf("%d dials under way, want %d", inFlight, tt.want)
				}
				time.Sleep(5 * time.Minute)
				synctest.Wait()
				tr.mu.Lock()
				defer tr.mu.Unlock()
				if tr.most > tt.want {
					t.Errorf("%d dials at once, want at most %d", tr.most, tt.want)
				}
				if tr.noLimit != 0 {
					t.Errorf("%d dials without a deadline", tr.noLimit)
				}
				if tr.dials <= tt.want {
					t.Errorf("%d dials in 5 minutes: the first ones did not end", tr.dials)
				}
			})
		})
	}
}

func TestWithMaxDialsValidated(t *testing.T) {
	_, err := New(WithTransport(newMemNet()), WithMaxDials(-1))
	if err == nil || !strings.Contains(err.Error(), "WithMaxDials(-1)") {
		t.Errorf("New(WithMaxDials(-1)) = %v, want an error naming the option", err)
	}
}

// TestSlowFirstPullKeepsConnection: a peer that does not answer the
// catalog pull on a new connection within the timeout (a loaded host),
// or refuses it as overloaded, is pulled again on the same connection at
// the next refresh: one dial, and its patterns routed once a pull is
// answered. A catalog it answers with another error closes the
// connection, as before.
func TestSlowFirstPullKeepsConnection(t *testing.T) {
	for _, tt := range []struct {
		name      string
		fail      func(ctx context.Context) *Message // the first pull's answer
		wantDials int
	}{
		{"timed out", func(ctx context.Context) *Message {
			<-ctx.Done() // past the pull's timeout
			return errorReply(ctx.Err())
		}, 1},
		{"overloaded", func(context.Context) *Message {
			return &Message{Code: CodeUnavailable, Error: "busy"}
		}, 1},
		{"refused", func(context.Context) *Message {
			return &Message{Code: CodePermissionDenied, Error: "no"}
		}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				net := newMemNet()
				c, d := memNode(t, net, "c")
				var mu sync.Mutex
				pulls := 0
				cat := []byte(`{"id":"x","patterns":["role:a"]}`)
				net.serve("x", serverFunc(func(ctx context.Context, m *Message) *Message {
					if m.Pattern != introspect.CatalogPattern {
						return &Message{}
					}
					mu.Lock()
					pulls++
					first := pulls == 1
					mu.Unlock()
					if first {
						return tt.fail(ctx)
					}
					return &Message{Codec: CodecJSON, Payload: cat}
				}))
				d.host.PeerUp(discovery.Peer{ID: "x", Addr: "x"})
				synctest.Wait()
				if _, ok, _ := c.Route("role:a"); ok {
					t.Fatal("role:a routed before a pull was answered")
				}
				time.Sleep(c.remote.pullTimeout() + c.remote.refresh + maxDialBackoff)
				synctest.Wait()
				if _, ok, _ := c.Route("role:a"); !ok {
					t.Error("role:a not routed after the pull again")
				}
				if got := net.count(net.dials, "x"); got != tt.wantDials {
					t.Errorf("%d dials, want %d", got, tt.wantDials)
				}
			})
		})
	}
}

// TestDialTimeout: a dial is given minDialTimeout (the listeners'
// handshake timeout), or the default timeout when that is longer, not
// given up sooner on a peer still working on it.
func TestDialTimeout(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []Option
		want time.Duration
	}{
		{"default", nil, minDialTimeout},
		{"WithDefaultTimeout(time.Minute)", []Option{WithDefaultTimeout(time.Minute)}, time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := &holdNet{}
				d := &hostDiscovery{}
				n, err := New(append([]Option{WithTransport(tr), WithDiscovery(d)}, tt.opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				defer n.Close()
				d.host.PeerUp(discovery.Peer{ID: "a", Addr: "10.0.0.1:1"})
				synctest.Wait()
				tr.mu.Lock()
				defer tr.mu.Unlock()
				if len(tr.limits) != 1 || tr.limits[0] != tt.want {
					t.Errorf("dials given %v, want one given %v", tr.limits, tt.want)
				}
			})
		})
	}
}

// TestSlowPullAnswered: a catalog pull answered after the default timeout
// (5s) but within minDialTimeout (a loaded peer) is taken: the peer is
// routed on the first pull, not pulled again.
func TestSlowPullAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newMemNet()
		c, d := memNode(t, net, "c")
		const late = 7 * time.Second
		if late <= c.remote.defaultTimeout || late >= minDialTimeout {
			t.Fatalf("the answer's delay %v is not between the default timeout %v and %v", late, c.remote.defaultTimeout, minDialTimeout)
		}
		var mu sync.Mutex
		pulls := 0
		net.serve("x", serverFunc(func(ctx context.Context, m *Message) *Message {
			mu.Lock()
			pulls++
			mu.Unlock()
			select {
			case <-time.After(late): // the loaded peer's answer, late
			case <-ctx.Done(): // the caller gave up
				return errorReply(ctx.Err())
			}
			return &Message{Codec: CodecJSON, Payload: []byte(`{"id":"x","patterns":["role:a"]}`)}
		}))
		d.host.PeerUp(discovery.Peer{ID: "x", Addr: "x"})
		time.Sleep(late + time.Second)
		synctest.Wait()
		if _, ok, _ := c.Route("role:a"); !ok {
			t.Error("role:a not routed after its pull was answered")
		}
		mu.Lock()
		defer mu.Unlock()
		if pulls != 1 {
			t.Errorf("%d pulls, want 1", pulls)
		}
	})
}

// TestPullsQueued: a node pulls at most maxPulls catalogs at once, the
// rest wait for a slot, and a pull's timeout starts with its slot: when
// every peer's catalog is new at once (a mesh-wide deploy) and each
// answers slowly, no pull is given up and pulled again, and every peer
// is routed once the queue has run.
func TestPullsQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newMemNet()
		c, d := memNode(t, net, "c")
		const slow = 6 * time.Second // each pull's answer; 3 rounds of them exceed the pull timeout
		peers := 3 * maxPulls
		if 3*slow <= c.remote.pullTimeout() {
			t.Fatalf("%d rounds of %v fit the pull timeout %v: the test shows nothing", 3, slow, c.remote.pullTimeout())
		}
		var mu sync.Mutex
		pulled, gaveUp, running, most := map[string]int{}, 0, 0, 0
		for i := range peers {
			id := fmt.Sprintf("x%d", i)
			net.serve(id, serverFunc(func(ctx context.Context, m *Message) *Message {
				mu.Lock()
				pulled[id]++
				running++
				most = max(most, running)
				mu.Unlock()
				defer func() {
					mu.Lock()
					running--
					mu.Unlock()
				}()
				select {
				case <-time.After(slow):
				case <-ctx.Done():
					mu.Lock()
					gaveUp++
					mu.Unlock()
					return errorReply(ctx.Err())
				}
				return &Message{Codec: CodecJSON, Payload: fmt.Appendf(nil, `{"id":%q,"patterns":["role:%s"]}`, id, id)}
			}))
		}
		for i := range peers {
			id := fmt.Sprintf("x%d", i)
			d.host.PeerUp(discovery.Peer{ID: id, Addr: id})
		}
		time.Sleep(3*slow + time.Second)
		synctest.Wait()
		for i := range peers {
			if _, ok, _ := c.Route(fmt.Sprintf("role:x%d", i)); !ok {
				t.Errorf("role:x%d not routed after the queue ran", i)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if most > maxPulls {
			t.Errorf("%d pulls ran at once, want at most %d", most, maxPulls)
		}
		if gaveUp > 0 {
			t.Errorf("%d pulls given up by the caller, want none", gaveUp)
		}
		if len(pulled) != peers {
			t.Errorf("%d of %d peers' catalogs pulled", len(pulled), peers)
		}
	})
}
