package durable

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/testkit/testwait"
)

// TestOncePerGroup: 3 groups of 3 members, each a node with a NATS
// connection of its own on an embedded JetStream broker: every event is
// handled exactly once in each group.
func TestOncePerGroup(t *testing.T) {
	b := startJetStream(t)
	urls := []string{b.URL()}
	ta := newTally()
	groups := []string{"billing", "shipping", "mail"}
	for _, g := range groups {
		for range 3 {
			m := newMember(t, urls, "orders")
			if err := m.ev.Subscribe(t.Context(), "role:order", g, counting(ta), AckWait(2*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
	}
	em := newMember(t, urls, "orders")
	ids := emitN(t, em.ev, "e", 300)
	testwait.Until(t, "every event handled in every group", func() bool { return ta.covered(groups, ids) })
	drained(t, em.ev, groups...)
	ta.check(t, groups, ids)
}

// TestMemberKilled: a member of a group is killed (its NATS connection
// closed, then its node) while it holds events, its handlers stopped
// before they finish; the other members get those events after the ack
// wait, and every event is handled exactly once.
func TestMemberKilled(t *testing.T) {
	b := startJetStream(t)
	urls := []string{b.URL()}
	ta := newTally()
	const concurrency = 4
	victim := newMember(t, urls, "orders")
	var victimRuns atomic.Int64
	holding := make(chan struct{}, concurrency)
	release := make(chan struct{})
	err := victim.ev.Subscribe(t.Context(), "role:order", "billing", func(ctx context.Context, req runtime.Request) (any, error) {
		if victimRuns.Add(1) > 10 {
			// Held until the member is killed: its work never finishes.
			// (Those that start after the kill, from the deliveries it
			// had taken, fail at once.)
			select {
			case holding <- struct{}{}:
			default:
			}
			<-release
			return nil, errCrashed
		}
		return counting(ta)(ctx, req)
	}, AckWait(time.Second), Concurrency(concurrency))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		m := newMember(t, urls, "orders")
		if err := m.ev.Subscribe(t.Context(), "role:order", "billing", counting(ta), AckWait(time.Second), Concurrency(concurrency)); err != nil {
			t.Fatal(err)
		}
	}
	em := newMember(t, urls, "orders")
	ids := emitN(t, em.ev, "k", 200)
	for range concurrency {
		testwait.Recv(t, holding)
	}
	// Every slot of the victim is held: what it finished is recorded and
	// acked; what it holds or has buffered is not.
	victim.nc.Close()
	close(release)
	victim.ev.Close()
	victim.node.Close()
	testwait.Until(t, "every event handled", func() bool { return ta.covered([]string{"billing"}, ids) })
	drained(t, em.ev, "billing")
	ta.check(t, []string{"billing"}, ids)
}

// TestPoisonEvent: an event whose handler always fails is delivered
// MaxDeliveries times, then lands on the group's dead-letter subject with
// the headers that say why; the events after it are handled meanwhile.
func TestPoisonEvent(t *testing.T) {
	b := startJetStream(t)
	urls := []string{b.URL()}
	ta := newTally()
	m := newMember(t, urls, "orders")
	var poisonRuns atomic.Int64
	err := m.ev.Subscribe(t.Context(), "role:order", "billing", func(ctx context.Context, req runtime.Request) (any, error) {
		if id, _ := req.String("id"); id == "poison" {
			poisonRuns.Add(1)
			return nil, errors.New("cannot bill this order")
		}
		return counting(ta)(ctx, req)
	}, MaxDeliveries(3), Backoff(20*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	dead, err := m.nc.SubscribeSync("wizard.dead.orders.billing")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := m.ev.Emit(t.Context(), "role:order,event:placed", map[string]any{"id": "poison"})
	if err != nil {
		t.Fatal(err)
	}
	ids := emitN(t, m.ev, "p", 50)
	dl, err := dead.NextMsg(testwait.Guard)
	if err != nil {
		t.Fatalf("no dead letter: %v", err)
	}
	want := map[string]string{
		HeaderDeadGroup:      "billing",
		HeaderDeadStream:     "wizard_events_orders",
		HeaderDeadSeq:        strconv.FormatUint(rc.Seq, 10),
		HeaderDeadDeliveries: "3",
		HeaderDeadSubject:    "wizard.event.orders.event:placed.role:order",
		headerPattern:        "event:placed,id:poison,role:order",
	}
	for k, v := range want {
		if got := dl.Header.Get(k); got != v {
			t.Errorf("dead letter header %s = %q, want %q", k, got, v)
		}
	}
	if got := dl.Header.Get(HeaderDeadError); got != "cannot bill this order" {
		t.Errorf("dead letter header %s = %q, want the handler's error", HeaderDeadError, got)
	}
	testwait.Until(t, "the other events handled", func() bool { return ta.covered([]string{"billing"}, ids) })
	drained(t, m.ev, "billing")
	ta.check(t, []string{"billing"}, ids)
	if n := poisonRuns.Load(); n != 3 {
		t.Errorf("the poison event's handler ran %d times, want 3 (MaxDeliveries)", n)
	}
	st, err := m.ev.Stats(t.Context(), "billing")
	if err != nil {
		t.Fatal(err)
	}
	if st.DeadLettered != 1 || st.Failed != 3 || st.Handled != 50 {
		t.Errorf("Stats = %+v; want 1 dead-lettered, 3 failed, 50 handled", st)
	}
}

// TestLag: a group whose only member is stopped shows the events emitted
// meanwhile as pending in Stats; a new member drains them to 0.
func TestLag(t *testing.T) {
	b := startJetStream(t)
	urls := []string{b.URL()}
	ta := newTally()
	first := newMember(t, urls, "orders")
	if err := first.ev.Subscribe(t.Context(), "role:order", "reports", counting(ta)); err != nil {
		t.Fatal(err)
	}
	first.ev.Close()
	em := newMember(t, urls, "orders")
	ids := emitN(t, em.ev, "l", 40)
	testwait.Until(t, "40 events pending", func() bool {
		st, err := em.ev.Stats(t.Context(), "reports")
		return err == nil && st.Pending == 40
	})
	again := newMember(t, urls, "orders")
	if err := again.ev.Subscribe(t.Context(), "role:order", "reports", counting(ta)); err != nil {
		t.Fatal(err)
	}
	drained(t, em.ev, "reports")
	ta.check(t, []string{"reports"}, ids)
	st, err := again.ev.Stats(t.Context(), "reports")
	if err != nil {
		t.Fatal(err)
	}
	if st.Handled != 40 || st.Pending != 0 {
		t.Errorf("the new member's Stats = %+v; want 40 handled, 0 pending", st)
	}
}

// TestCrashAfterRecord: a member's connection is closed after an event's
// record is written and before its ack; the event goes to another member
// after the ack wait, which finds the record and acks it without running
// the handler again.
func TestCrashAfterRecord(t *testing.T) {
	b := startJetStream(t)
	urls := []string{b.URL()}
	ta := newTally()
	a := newMember(t, urls, "orders")
	var once sync.Once
	crashed := make(chan struct{})
	afterRecord = func(e *Events, seq uint64) {
		if e == a.ev {
			once.Do(func() {
				a.nc.Close()
				close(crashed)
			})
		}
	}
	t.Cleanup(func() { afterRecord = nil })
	if err := a.ev.Subscribe(t.Context(), "role:order", "billing", counting(ta), AckWait(time.Second)); err != nil {
		t.Fatal(err)
	}
	ids := emitN(t, a.ev, "c", 1)
	testwait.Recv(t, crashed)
	bm := newMember(t, urls, "orders")
	if err := bm.ev.Subscribe(t.Context(), "role:order", "billing", counting(ta), AckWait(time.Second)); err != nil {
		t.Fatal(err)
	}
	drained(t, bm.ev, "billing")
	ta.check(t, []string{"billing"}, ids)
	st, err := bm.ev.Stats(t.Context(), "billing")
	if err != nil {
		t.Fatal(err)
	}
	if st.Redelivered != 1 || st.Skipped != 1 || st.Handled != 0 {
		t.Errorf("the second member's Stats = %+v; want the event redelivered once and skipped", st)
	}
}

// TestConfigConflict: a stream that exists with other storage is an error
// naming the field; a limit set by an option is updated.
func TestConfigConflict(t *testing.T) {
	b := startJetStream(t)
	urls := []string{b.URL()}
	m := newMember(t, urls, "orders")
	_, err := New(t.Context(), m.node, m.js, "orders", WithStorage(1))
	if err == nil || !strings.Contains(err.Error(), "Storage") {
		t.Errorf("New with memory storage over a file stream: %v; want an error naming Storage", err)
	}
	if _, err := New(t.Context(), m.node, m.js, "orders", WithMaxAge(time.Hour)); err != nil {
		t.Fatal(err)
	}
	s, err := m.js.Stream(t.Context(), "wizard_events_orders")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.MaxAge; got != time.Hour {
		t.Errorf("MaxAge = %v after New(WithMaxAge(time.Hour)), want 1h", got)
	}
	for _, bad := range []string{"", "a.b", "a b", "a*"} {
		if _, err := New(t.Context(), m.node, m.js, bad); err == nil {
			t.Errorf("New(%q) succeeded; want an error", bad)
		}
	}
}

// TestEmit: the metadata of the emitter's ctx (trace context) reaches the
// handler; an event emitted again with the same MsgID is a duplicate the
// stream drops; the subject names the space and the emitted pairs.
func TestEmit(t *testing.T) {
	b := startJetStream(t)
	m := newMember(t, []string{b.URL()}, "orders")
	got := make(chan string, 4)
	err := m.ev.Subscribe(t.Context(), "role:order", "billing", func(ctx context.Context, req runtime.Request) (any, error) {
		id, _ := req.String("id")
		got <- id + " " + runtime.IncomingMetadata(ctx).Get("traceparent")
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := m.nc.SubscribeSync("wizard.event.orders.>")
	if err != nil {
		t.Fatal(err)
	}
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ctx := runtime.AppendMetadata(t.Context(), "traceparent", tp)
	first, err := m.ev.Emit(ctx, "role:order,event:placed", map[string]any{"id": "1"}, MsgID("order-1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := m.ev.Emit(ctx, "role:order,event:placed", map[string]any{"id": "1"}, MsgID("order-1"))
	if err != nil {
		t.Fatal(err)
	}
	if first.Duplicate || !again.Duplicate || again.Seq != first.Seq {
		t.Errorf("emitted twice with one MsgID: %+v then %+v; want the second a duplicate of the first", first, again)
	}
	if _, err := m.ev.Emit(ctx, "role:order,event:placed", map[string]any{"id": "2"}); err != nil {
		t.Fatal(err)
	}
	// Handled concurrently: in either order.
	runs := []string{testwait.Recv(t, got), testwait.Recv(t, got)}
	slices.Sort(runs)
	if diff := cmp.Diff([]string{"1 " + tp, "2 " + tp}, runs); diff != "" {
		t.Errorf("the handler's runs (-want +got):\n%s", diff)
	}
	msg, err := sub.NextMsg(testwait.Guard)
	if err != nil {
		t.Fatal(err)
	}
	if want := "wizard.event.orders.event:placed.role:order"; msg.Subject != want {
		t.Errorf("subject %q, want %q", msg.Subject, want)
	}
	drained(t, m.ev, "billing")
	select {
	case g := <-got:
		t.Errorf("the duplicate ran: %q", g)
	default:
	}
}

// TestAtLeastOnce: groups subscribed with AtLeastOnce handle every event
// at least once, a member of one killed mid-stream while it holds events
// (its handlers never finish) included, and write no record in the
// space's bucket.
func TestAtLeastOnce(t *testing.T) {
	b := startJetStream(t)
	urls := []string{b.URL()}
	ta := newTally()
	const concurrency = 4
	victim := newMember(t, urls, "orders")
	var victimRuns atomic.Int64
	holding := make(chan struct{}, concurrency)
	release := make(chan struct{})
	err := victim.ev.Subscribe(t.Context(), "role:order", "billing", func(ctx context.Context, req runtime.Request) (any, error) {
		if victimRuns.Add(1) > 10 {
			// Held until the member is killed: its work never finishes.
			// (Those that start after the kill, from the deliveries it
			// had taken, fail at once.)
			select {
			case holding <- struct{}{}:
			default:
			}
			<-release
			return nil, errCrashed
		}
		return counting(ta)(ctx, req)
	}, AtLeastOnce(), AckWait(time.Second), Concurrency(concurrency))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"billing", "billing", "mail", "mail"} {
		m := newMember(t, urls, "orders")
		if err := m.ev.Subscribe(t.Context(), "role:order", g, counting(ta), AtLeastOnce(), AckWait(time.Second), Concurrency(concurrency)); err != nil {
			t.Fatal(err)
		}
	}
	em := newMember(t, urls, "orders")
	ids := emitN(t, em.ev, "a", 200)
	for range concurrency {
		testwait.Recv(t, holding)
	}
	victim.nc.Close()
	close(release)
	victim.ev.Close()
	victim.node.Close()
	groups := []string{"billing", "mail"}
	testwait.Until(t, "every event handled in every group", func() bool { return ta.covered(groups, ids) })
	drained(t, em.ev, groups...)
	ta.mu.Lock()
	for _, g := range groups {
		for _, id := range ids {
			if n := ta.runs[g][id]; n > 1 {
				t.Logf("group %s ran event %s %d times (at least once allows it)", g, id, n)
			}
		}
	}
	ta.mu.Unlock()
	keys, err := em.ev.records.ListKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		t.Errorf("record %s written by an AtLeastOnce group", k)
	}
}
