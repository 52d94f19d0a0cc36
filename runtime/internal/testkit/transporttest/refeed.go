package transporttest

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/link"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

// RefeedAfterAnswersDropped checks that a call refed after its
// connection was out runs once, however many answers other callers
// filled the serving node's de-duplication table with meanwhile: the
// victim's call runs, its link goes down before the answer reaches it,
// other callers' large answers fill the table's bound on bytes, and the
// link comes up as soon as the caller noticed, or 2.5s later. The copy
// sent again must not run the handler a second time: it is answered
// runtime.ErrAnswerDropped. A link that goes silent when down (silent:
// UDP, so the caller notices by keep-alive) is waited for a second after
// that, one whose connections are closed within the call's deadline: over
// a silent link the call may also fail as lost (unavailable) if its peer
// is not back in time; either way it runs once.
//
// newTr makes a transport of the kind under test; relay puts a link
// before the server's address.
func RefeedAfterAnswersDropped(t *testing.T, newTr func(testing.TB) runtime.Transport, relay func(testing.TB, string) link.Link, silent bool) {
	for _, c := range []struct {
		name string
		down time.Duration
		lost bool // the refeed may give up (a silent link): the call may fail unavailable
	}{{"BriefOutage", 0, silent}, {"OutageOfSeconds", 2500 * time.Millisecond, silent}} {
		t.Run(c.name, func(t *testing.T) { refeedAfterAnswersDropped(t, newTr, relay, c.down, c.lost) })
	}
}

func refeedAfterAnswersDropped(t *testing.T, newTr func(testing.TB) runtime.Transport, relay func(testing.TB, string) link.Link, downFor time.Duration, lost bool) {
	const (
		bound = 16 << 20 // the server's table's bytes (WithDedupBytes)
		big   = 1 << 20  // an answer
	)
	var pays atomic.Int64
	ran, release := make(chan struct{}, 1), NewGate(t)
	srv := NewServer(t, newTr(t), runtime.WithDedupBytes(bound))
	MustAdd(t, srv, "role:pay", func(ctx context.Context, _ runtime.Request) (any, error) {
		pays.Add(1)
		ran <- struct{}{}
		<-release.C()
		return "paid", nil
	})
	payload := strings.Repeat("x", big)
	MustAdd(t, srv, "role:fill", func(ctx context.Context, _ runtime.Request) (any, error) {
		return payload, nil
	})
	l := relay(t, srv.Addr())
	victim := NewClient(t, newTr(t), "role:pay", nil, l.Addr())
	other := NewClient(t, newTr(t), "role:fill", nil, srv.Addr())

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := victim.ActE(ctx, "role:pay", nil)
		done <- err
	}()
	<-ran
	down := time.Now()
	l.Down()
	release.Open() // its answer is kept by the server, and lost on the way

	// One and a half times the table's bound of other callers' answers:
	// the victim's answer, kept as its handler returned, is dropped for
	// room (half the bound at a time) within the first bound's worth.
	for i := range 3 * bound / 2 / big {
		if _, err := other.ActE(t.Context(), "role:fill", nil); err != nil {
			t.Fatalf("fill call %d: %v", i, err)
		}
	}
	// Up once the victim has noticed its connection is lost (at once over
	// TCP; a silent QUIC connection takes the keep-alive's time), so
	// that the answer cannot come late on the old connection, and the
	// outage's time has passed.
	testwait.Until(t, "the victim to lose its connection and the outage's time to pass", func() bool {
		return time.Since(down) > downFor && !connectedTo(victim, l.Addr())
	})
	l.Up()

	err := <-done
	if n := pays.Load(); n != 1 {
		t.Errorf("the call ran %d times, want once", n)
	}
	if lost && runtime.CodeOf(err) == runtime.CodeUnavailable {
		// Not back within a second of the caller noticing the silence:
		// the call failed as lost, having run once.
		t.Logf("the link was not back within the silent refeed window: %v", err)
		return
	}
	if !errors.Is(err, runtime.ErrAnswerDropped) {
		t.Errorf("the refed call: %v; want %v", err, runtime.ErrAnswerDropped)
	}
	if got := victim.Stats().Refeeds; got < 1 {
		t.Errorf("%d refeeds, want the call sent again", got)
	}
}

// connectedTo reports whether n holds a connection to the peer at addr.
func connectedTo(n *runtime.Node, addr string) bool {
	for _, m := range n.Members() {
		if m.Addr == addr && m.Connected {
			return true
		}
	}
	return false
}
