package durable

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/eventhook"
)

// group is a group's consumer on this node: its subscriptions here and
// the deliveries it handles.
type group struct {
	e     *Events
	name  string
	token string // name as a subject token and consumer name (tokenOf)
	cfg   subConfig
	dead  string // the dead-letter subject
	subs  atomic.Pointer[[]eventhook.Sub]
	cons  jetstream.Consumer
	cc    jetstream.ConsumeContext
	slots chan struct{} // one per handler running: Concurrency

	mu      sync.Mutex
	running map[uint64]*run    // by stream sequence: the events being handled here
	failed  map[uint64]failure // events whose handlers failed here, still to succeed
	stats   counters
}

// run is an event being handled on this node; a copy delivered meanwhile
// waits for its outcome.
type run struct {
	done    chan struct{}
	outcome outcome
	err     error
}

// failure is what this node knows of an event whose handlers failed on
// it: how many times (the de-duplication table keeps the failed outcome,
// so a retry here runs under another key) and when last.
type failure struct {
	n  int
	at time.Time
}

// counters are a group's figures on this node.
type counters struct {
	delivered, redelivered, handled, skipped, failed, refused, deadLettered uint64
}

// Subscribe runs h on the events of the space that match pattern, as a
// member of group ("" for the node's service, [runtime.WithService]).
// A group has one durable JetStream consumer, shared by its members on
// every node (JetStream balances the events among them): its name is the
// group's, with characters other than letters, digits and '-' escaped as
// _XX. Every subscription of the group whose pattern matches an event
// runs on it, on the member that got it; an event that matches none of
// the member's subscriptions is acked at once, so the members of a group
// should subscribe the same patterns.
//
// An event is acked once its handlers returned without error, after the
// record that the group handled it is written (see the package doc for
// what this guarantees). A handler's error has it delivered again after
// the [Backoff] delay, up to [MaxDeliveries], then sent to the group's
// dead-letter subject and dropped from the group. h's answer is dropped.
//
// ctx bounds making the consumer; the subscription lasts until
// [Events.Close]. A new group starts with the events emitted from now on
// unless [StartAll], [StartSeq] or [StartTime] says otherwise.
func (e *Events) Subscribe(ctx context.Context, pattern, group string, h runtime.Handler, opts ...SubscribeOption) error {
	group = cmp.Or(group, e.node.Service())
	fail := func(err error) error {
		return fmt.Errorf("wizard: event space %q: Subscribe(%q, %q): %w", e.space, pattern, group, err)
	}
	sub, err := eventhook.NewSub(e.node, pattern, group, h)
	if err != nil {
		return fail(err)
	}
	c := subConfig{
		maxDeliveries: DefaultMaxDeliveries,
		backoff:       DefaultBackoff,
		ackWait:       DefaultAckWait,
		concurrency:   DefaultConcurrency,
		deliver:       jetstream.DeliverNewPolicy,
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.applySub(&c); err != nil {
			return fail(err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closing {
		return fail(errClosed)
	}
	if g := e.groups[group]; g != nil {
		subs := append(append([]eventhook.Sub(nil), *g.subs.Load()...), sub)
		g.subs.Store(&subs)
		return nil
	}
	g, err := e.startGroup(ctx, group, c)
	if err != nil {
		return fail(err)
	}
	subs := []eventhook.Sub{sub}
	g.subs.Store(&subs)
	cc, err := g.cons.Consume(g.deliver, jetstream.PullMaxMessages(c.concurrency),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			e.log.Debug("wizard: durable events: consuming", "space", e.space, "group", group, "err", err)
		}))
	if err != nil {
		return fail(fmt.Errorf("consuming: %w", err))
	}
	g.cc = cc
	e.groups[group] = g
	return nil
}

// errClosed is the error of a Subscribe after Close.
var errClosed = errors.New("the events are closed")

// startGroup makes (or finds) the group's consumer.
func (e *Events) startGroup(ctx context.Context, name string, c subConfig) (*group, error) {
	g := &group{
		e: e, name: name, token: tokenOf(name), cfg: c,
		slots:   make(chan struct{}, c.concurrency),
		running: map[uint64]*run{},
		failed:  map[uint64]failure{},
	}
	g.dead = cmp.Or(c.deadLetter, deadPrefix+e.space+"."+g.token)
	cons, err := e.js.Consumer(ctx, e.stream, g.token)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cc := jetstream.ConsumerConfig{
			Durable:       g.token,
			Description:   "wizard: group " + name + " of event space " + e.space,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       c.ackWait,
			MaxDeliver:    -1, // the handlers' failures are counted against MaxDeliveries here
			FilterSubject: e.subject + ".>",
			DeliverPolicy: c.deliver,
			OptStartSeq:   c.startSeq,
			OptStartTime:  c.startTime,
			Replicas:      0, // the stream's
		}
		cons, err = e.js.CreateConsumer(ctx, e.stream, cc)
		if errors.Is(err, jetstream.ErrConsumerExists) {
			cons, err = e.js.Consumer(ctx, e.stream, g.token)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the group's consumer %s on stream %s: %w", g.token, e.stream, err)
	}
	g.cons = cons
	return g, nil
}

// deliver takes a delivery from the consumer: it waits for a free slot,
// then handles the event on a goroutine of its own.
func (g *group) deliver(msg jetstream.Msg) {
	e := g.e
	g.slots <- struct{}{}
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		<-g.slots
		_ = msg.Nak() // for another member, at once
		return
	}
	e.running.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.running.Done()
		defer func() { <-g.slots }()
		g.handle(msg)
	}()
}

// outcome is how a delivery ended on this node.
type outcome uint8

const (
	handled outcome = iota // the handlers ran without error (here or before)
	refused                // the node did not run them: closing or overloaded
	failed                 // a handler failed
)

// handle handles one delivery of an event.
func (g *group) handle(msg jetstream.Msg) {
	e := g.e
	md, err := msg.Metadata()
	if err != nil {
		e.log.Warn("wizard: durable events: a delivery without metadata", "space", e.space, "group", g.name, "err", err)
		_ = msg.Nak()
		return
	}
	seq, n := md.Sequence.Stream, md.NumDelivered
	g.count(func(c *counters) {
		c.delivered++
		if n > 1 {
			c.redelivered++
		}
	})
	ev, err := eventOf(msg.Headers(), msg.Data())
	if err != nil {
		g.deadLetter(msg, md, err)
		return
	}
	var subs []eventhook.Sub
	for _, s := range *g.subs.Load() {
		if eventhook.Matches(s, ev.Pattern) {
			subs = append(subs, s)
		}
	}
	if subs == nil {
		_ = msg.Ack()
		return
	}
	if n > 1 {
		switch done, err := g.recorded(seq); {
		case err != nil:
			// Whether the group handled it is not known: later.
			g.count(func(c *counters) { c.refused++ })
			_ = msg.NakWithDelay(g.cfg.backoff[0])
			return
		case done:
			g.count(func(c *counters) { c.skipped++ })
			_ = msg.Ack()
			return
		}
	}
	r, first := g.begin(seq)
	if !first {
		// A copy of an event this node is handling: its outcome is the
		// first delivery's.
		<-r.done
		g.count(func(c *counters) { c.skipped++ })
		g.settle(msg, md, r.outcome, r.err, false)
		return
	}
	ev.Group, ev.Seq = g.name, seq
	ev.Source = "jetstream:" + e.stream
	if f := g.failures(seq); f > 0 {
		// The table keeps the failed outcome under the first key: a
		// retry on this node runs under a key of its own.
		ev.Source += fmt.Sprintf(";retry=%d", f)
	}
	stop := g.heartbeat(msg)
	err = eventhook.Run(context.Background(), e.node, subs, ev)
	r.outcome, r.err = classify(err), err
	g.settle(msg, md, r.outcome, err, true)
	stop()
	g.end(seq, r)
}

// heartbeat tells JetStream the event of msg is in progress every third
// of the ack wait, until the function it returns is called.
func (g *group) heartbeat(msg jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	var beat sync.WaitGroup
	beat.Go(func() {
		t := time.NewTicker(g.cfg.ackWait / 3)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = msg.InProgress()
			case <-done:
				return
			}
		}
	})
	return func() {
		close(done)
		beat.Wait()
	}
}

// settle acks, naks or dead-letters a delivery by its outcome; write
// says whether a handled event's record is to be written (not by a copy
// of a delivery, whose first wrote it).
func (g *group) settle(msg jetstream.Msg, md *jetstream.MsgMetadata, o outcome, err error, write bool) {
	seq, n := md.Sequence.Stream, md.NumDelivered
	switch o {
	case handled:
		if write && !g.record(seq) {
			// Acked without its record, a redelivery of it (were the
			// ack lost too) would run elsewhere: it is left to its
			// redelivery, which this node's table answers.
			return
		}
		if afterRecord != nil {
			afterRecord(g.e, seq)
		}
		if err := msg.Ack(); err != nil {
			g.e.log.Debug("wizard: durable events: ack", "space", g.e.space, "group", g.name, "seq", seq, "err", err)
		}
		g.count(func(c *counters) { c.handled++ })
		g.forget(seq)
	case refused:
		g.count(func(c *counters) { c.refused++ })
		_ = msg.Nak()
	case failed:
		g.count(func(c *counters) { c.failed++ })
		if n >= uint64(g.cfg.maxDeliveries) {
			g.deadLetter(msg, md, err)
			g.forget(seq)
			return
		}
		_ = msg.NakWithDelay(g.cfg.backoff[min(int(n)-1, len(g.cfg.backoff)-1)])
	}
}

// afterRecord, when set by a test, runs between an event's record and
// its ack: where a crash leaves a recorded event unacked.
var afterRecord func(e *Events, seq uint64)

// classify tells the outcome of eventhook.Run's error.
func classify(err error) outcome {
	if err == nil {
		return handled
	}
	var re *runtime.Error
	if errors.As(err, &re) {
		switch {
		case re.Code == runtime.CodeDataLoss && re.Message == runtime.ErrAnswerDropped.Message:
			// It ran on this node; its outcome is no longer kept. A
			// failure would have been redelivered before it was dropped.
			return handled
		case re.Code == runtime.CodeUnavailable && re.Message == runtime.ErrClosed.Error(),
			re.Code == runtime.CodeResourceExhausted && strings.Contains(re.Message, "in-flight limit"):
			return refused
		}
	}
	return failed
}

// begin notes that this node handles the event seq, or returns the run
// of it going on.
func (g *group) begin(seq uint64) (*run, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r := g.running[seq]; r != nil {
		return r, false
	}
	r := &run{done: make(chan struct{})}
	g.running[seq] = r
	return r, true
}

// end notes that the run r of seq ended, and its failure if it failed.
func (g *group) end(seq uint64, r *run) {
	g.mu.Lock()
	delete(g.running, seq)
	if r.outcome == failed {
		f := g.failed[seq]
		if f.n == 0 && len(g.failed) >= maxFailures {
			g.sweepFailures()
		}
		g.failed[seq] = failure{n: f.n + 1, at: time.Now()}
	}
	g.mu.Unlock()
	close(r.done)
}

// maxFailures bounds the failed events a group remembers before it drops
// those the de-duplication table no longer keeps (failureKept).
const (
	maxFailures = 4096
	failureKept = 2 * time.Minute
)

// sweepFailures drops the failures older than failureKept. Callers hold
// g.mu.
func (g *group) sweepFailures() {
	for seq, f := range g.failed {
		if time.Since(f.at) > failureKept {
			delete(g.failed, seq)
		}
	}
}

// failures returns how many times seq's handlers failed on this node.
func (g *group) failures(seq uint64) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.failed[seq].n
}

// forget drops what this node knows of seq's failures.
func (g *group) forget(seq uint64) {
	g.mu.Lock()
	delete(g.failed, seq)
	g.mu.Unlock()
}

func (g *group) count(f func(*counters)) {
	g.mu.Lock()
	f(&g.stats)
	g.mu.Unlock()
}

// tokenOf is s as a subject token, consumer name and record key: letters,
// digits and '-' kept, any other byte written _XX (hex).
func tokenOf(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "_%02X", c)
		}
	}
	return b.String()
}
