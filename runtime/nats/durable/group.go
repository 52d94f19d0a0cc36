package durable

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
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
	// source is the events' Source: "jetstream:<stream>", a key of the
	// node's de-duplication table with the group and sequence.
	source string
	subs   atomic.Pointer[[]eventhook.Sub]
	cons   jetstream.Consumer
	cc     jetstream.ConsumeContext
	slots  chan struct{} // one per handler running: Concurrency
	// flight has one per delivery taken and not yet settled: the events
	// in the chain claim, handlers, record, ack (pipelineDepth per slot).
	flight chan struct{}
	// work hands a delivery to an idle worker: a goroutine that handles
	// deliveries until Close, at most cap(flight) of them (a goroutine
	// per delivery grows its stack anew each time); quit ends them.
	work    chan jetstream.Msg
	workers atomic.Int32
	quit    chan struct{}
	// The acks of the deliveries handled (ack): those queued for the
	// caller acking, and a spare queue.
	ackMu              sync.Mutex
	acking             bool
	ackQueue, ackSpare []jetstream.Msg

	mu      sync.Mutex
	running map[uint64]*run // by stream sequence: the events being handled here
	stats   counters
}

// run is an event being handled on this node; a copy delivered meanwhile
// waits for its outcome. The group's beats keep its delivery alive.
type run struct {
	msg     jetstream.Msg
	seq     uint64
	outcome outcome
	err     error

	// done, under the group's mu, is made by the first copy that waits,
	// and closed at the end.
	done chan struct{}

	// beat is held while a beat runs on the delivery, and guards rev,
	// the claim's revision (0: none yet, or AtLeastOnce), and stopped.
	beat    sync.Mutex
	rev     uint64
	stopped bool
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
// what this guarantees; [AtLeastOnce] writes no record). A handler's error has it delivered again after
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
	g.subs.Store(&[]eventhook.Sub{sub})
	cc, err := g.cons.Consume(g.deliver, jetstream.PullMaxMessages(cap(g.flight)), jetstream.PullExpiry(pullExpiry),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			e.log.Debug("wizard: durable events: consuming", "space", e.space, "group", group, "err", err)
		}))
	if err != nil {
		return fail(fmt.Errorf("consuming: %w", err))
	}
	g.cc = cc
	e.groups[group] = g
	go g.beats() // until Close
	return nil
}

// pullExpiry is how long a member's pull request lasts; the broker's
// heartbeats come every half of it, and two missed ones have the member
// pull again: how soon it finds a consumer whose leader moved to another
// server of a cluster.
const pullExpiry = 5 * time.Second

// errClosed is the error of a Subscribe after Close.
var errClosed = errors.New("the events are closed")

// startGroup makes (or finds) the group's consumer.
func (e *Events) startGroup(ctx context.Context, name string, c subConfig) (*group, error) {
	g := &group{
		e: e, name: name, token: tokenOf(name), cfg: c,
		slots:   make(chan struct{}, c.concurrency),
		flight:  make(chan struct{}, c.concurrency*pipelineDepth),
		work:    make(chan jetstream.Msg),
		quit:    make(chan struct{}),
		running: map[uint64]*run{},
	}
	g.dead = cmp.Or(c.deadLetter, deadPrefix+e.space+"."+g.token)
	g.source = "jetstream:" + e.stream
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

// pipelineDepth is the deliveries a member takes per handler slot: with
// records, an event's claim and its "done" are round trips to the broker
// before and after its handlers, and other events' handlers run
// meanwhile; in both modes, the consumer pulls that many at a time, and
// pulls again when half are taken (a pull per few events costs the
// broker more than the events).
const pipelineDepth = 4

// deliver takes a delivery from the consumer: it waits until fewer than
// cap(g.flight) are in the chain, then hands the event to a worker (which
// waits for a handler slot once it holds the claim).
func (g *group) deliver(msg jetstream.Msg) {
	e := g.e
	g.flight <- struct{}{}
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		<-g.flight
		_ = msg.Nak() // for another member, at once
		return
	}
	e.running.Add(1)
	e.mu.Unlock()
	select {
	case g.work <- msg:
		return
	default:
	}
	if int(g.workers.Add(1)) <= cap(g.flight) {
		go g.worker(msg)
		return
	}
	// As many workers as deliveries in flight: one is about to be idle.
	g.workers.Add(-1)
	g.work <- msg
}

// worker handles msg, then the deliveries handed to it, until Close.
func (g *group) worker(msg jetstream.Msg) {
	for {
		g.handle(msg)
		<-g.flight
		g.e.running.Done()
		select {
		case msg = <-g.work:
		case <-g.quit:
			g.workers.Add(-1)
			return
		}
	}
}

// isClosing reports whether the Events is closing.
func (e *Events) isClosing() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closing
}

// outcome is how a delivery ended on this node.
type outcome uint8

const (
	handled   outcome = iota // the handlers ran without error (here or before)
	refused                  // the node did not run them: closing or overloaded
	failed                   // a handler failed
	elsewhere                // another member holds the event's claim
	unknown                  // the event's record could not be read
	gone                     // dead-lettered: terminated for the group
)

// handle handles one delivery of an event.
func (g *group) handle(msg jetstream.Msg) {
	e := g.e
	md, ok := deliveryOf(msg.Reply())
	if !ok {
		m, err := msg.Metadata()
		if err != nil {
			e.log.Warn("wizard: durable events: a delivery without metadata", "space", e.space, "group", g.name, "err", err)
			_ = msg.Nak()
			return
		}
		md = delivery{seq: m.Sequence.Stream, n: m.NumDelivered}
	}
	seq, n := md.seq, md.n
	g.count(func(c *counters) {
		c.delivered++
		if n > 1 {
			c.redelivered++
		}
	})
	ev, err := eventOf(msg.Headers(), msg.Data())
	if err != nil {
		_ = g.deadLetter(msg, md, err)
		return
	}
	subs, parsed := eventhook.Match(*g.subs.Load(), ev.Pattern)
	if subs == nil {
		_ = msg.Ack()
		return
	}
	r, wait := g.begin(msg, seq)
	if wait != nil {
		// A copy of an event this node is handling: its outcome is the
		// first delivery's.
		<-wait
		g.count(func(c *counters) { c.skipped++ })
		g.settle(msg, md, r, 0, false)
		return
	}
	defer g.end(seq, r)
	var rev uint64
	if !g.cfg.atLeastOnce {
		// Every delivery claims the event, the first too: a broker that
		// restarts after a crash may have lost the consumer's latest acks
		// and delivered counts (kept on disk after a delay), and deliver
		// again, as first deliveries, events the group handled or is
		// handling.
		var st claimState
		st, rev, err = g.claim(seq)
		switch {
		case err != nil:
			g.e.log.Debug("wizard: durable events: claiming an event", "space", e.space, "group", g.name, "seq", seq, "err", err)
			r.outcome = unknown
		case st == done:
			r.outcome = handled
			g.count(func(c *counters) { c.skipped++ })
		case st == busy:
			r.outcome = elsewhere
			g.count(func(c *counters) { c.skipped++ })
		}
		if err != nil || st != claimed {
			g.settle(msg, md, r, 0, false)
			return
		}
	}
	ev.Group, ev.Seq, ev.Parsed = g.name, seq, parsed
	ev.Source = g.source // the table keeps successes only: a retry of a failure runs
	// The beats renew the claim from now on: the event may wait for a
	// handler slot.
	r.beat.Lock()
	r.rev = rev
	r.beat.Unlock()
	g.slots <- struct{}{}
	if e.isClosing() {
		err = eventhook.ErrRefused // handed back for another member
	} else {
		err = eventhook.Run(context.Background(), e.node, subs, ev)
	}
	<-g.slots
	r.beat.Lock() // waits for a beat running
	rev, r.stopped = r.rev, true
	r.beat.Unlock()
	r.outcome, r.err = classify(err), err
	g.settle(msg, md, r, rev, true)
}

// beats keeps the deliveries running on this node alive, and their
// claims: every third of the ack wait it tells JetStream each is in
// progress and renews its claim. One ticker per group, rather than a
// timer per delivery: most deliveries end before their first beat.
func (g *group) beats() {
	every := g.cfg.ackWait / 3
	t := time.NewTicker(every)
	defer t.Stop()
	var due []*run
	for {
		select {
		case <-t.C:
		case <-g.quit:
			return
		}
		g.mu.Lock()
		for _, r := range g.running {
			due = append(due, r)
		}
		g.mu.Unlock()
		for _, r := range due {
			// Each on its own: a beat waits for the broker, up to
			// opTimeout when it is away, and others are due meanwhile.
			go g.beat(r)
		}
		clear(due)
		due = due[:0]
	}
}

// beat tells JetStream that r's delivery is in progress and renews its
// claim, unless r has stopped or a beat of it is still running.
func (g *group) beat(r *run) {
	if !r.beat.TryLock() {
		return
	}
	defer r.beat.Unlock()
	if r.stopped {
		return
	}
	_ = r.msg.InProgress()
	if r.rev != 0 {
		r.rev = g.renew(r.seq, r.rev)
	}
}

// settle acks, naks or dead-letters a delivery by the outcome of r; ran
// says whether this delivery ran the handlers, holding the event's claim
// at revision rev unless the group keeps no records (the record to write
// or the claim to release).
func (g *group) settle(msg jetstream.Msg, md delivery, r *run, rev uint64, ran bool) {
	seq, n := md.seq, md.n
	claimed := ran && !g.cfg.atLeastOnce
	switch r.outcome {
	case handled:
		if claimed && !g.markDone(seq) {
			// Acked without its record, a redelivery of it (were the
			// ack lost too) would run elsewhere: it is left to its
			// redelivery, which finds this member's claim.
			return
		}
		if claimed && afterRecord != nil {
			afterRecord(g.e, seq)
		}
		if ran {
			g.count(func(c *counters) { c.handled++ })
		}
		g.ack(msg)
	case refused:
		g.count(func(c *counters) { c.refused++ })
		if claimed {
			g.release(seq, rev)
		}
		_ = msg.Nak()
	case unknown:
		// Whether the group handled it is not known (the bucket did not
		// answer): later.
		g.count(func(c *counters) { c.refused++ })
		_ = msg.NakWithDelay(g.cfg.backoff[0])
	case elsewhere:
		_ = msg.NakWithDelay(g.cfg.ackWait)
	case gone:
		_ = msg.Term()
	case failed:
		if ran {
			g.count(func(c *counters) { c.failed++ })
		}
		if claimed {
			g.release(seq, rev)
		}
		if n >= uint64(g.cfg.maxDeliveries) {
			if g.deadLetter(msg, md, r.err) {
				r.outcome = gone
			}
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
	if errors.Is(err, eventhook.ErrRefused) {
		return refused // the node is closing or over its in-flight limit
	}
	var re *runtime.Error
	if errors.As(err, &re) && re.Code == runtime.CodeDataLoss && re.Message == runtime.ErrAnswerDropped.Message {
		// It ran on this node; its outcome is no longer kept (the
		// table keeps only successes).
		return handled
	}
	return failed
}

// begin notes that this node handles the delivery msg of the event seq,
// or returns the run of it going on and what closes when it ends.
func (g *group) begin(msg jetstream.Msg, seq uint64) (*run, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r := g.running[seq]; r != nil {
		if r.done == nil {
			r.done = make(chan struct{})
		}
		return r, r.done
	}
	r := &run{msg: msg, seq: seq}
	g.running[seq] = r
	return r, nil
}

// end notes that the run r of seq ended.
func (g *group) end(seq uint64, r *run) {
	g.mu.Lock()
	delete(g.running, seq)
	if r.done != nil {
		close(r.done)
	}
	g.mu.Unlock()
}

// ack acks the delivery msg, handled, or leaves it to the ack running:
// acks sent back to back share the connection's writes (a write, and
// the broker's read, per ack is much of what a short handler's delivery
// costs on both sides). The caller that acks drains what others leave
// meanwhile, and its delivery is counted running until it is done, so
// that Close waits for every ack.
func (g *group) ack(msg jetstream.Msg) {
	g.ackMu.Lock()
	g.ackQueue = append(g.ackQueue, msg)
	if g.acking {
		g.ackMu.Unlock()
		return
	}
	g.acking = true
	// Let the other workers run first, and queue the acks of the
	// handlers that end meanwhile: the acks are then published back to
	// back, before the connection's flusher writes. Only without records:
	// with them, a handler's ack waits for its record's round trip, the
	// acks are spread out, and a yield only costs a trip through the
	// scheduler (measured: 20% more of the member's CPU an event).
	if g.cfg.atLeastOnce {
		g.ackMu.Unlock()
		goruntime.Gosched()
		g.ackMu.Lock()
	}
	for len(g.ackQueue) > 0 {
		q := g.ackQueue
		g.ackQueue = g.ackSpare[:0]
		g.ackMu.Unlock()
		for _, m := range q {
			if err := m.Ack(); err != nil {
				g.e.log.Debug("wizard: durable events: ack", "space", g.e.space, "group", g.name, "err", err)
			}
		}
		clear(q)
		g.ackMu.Lock()
		g.ackSpare = q
	}
	g.acking = false
	g.ackMu.Unlock()
}

// delivery is what a delivery's reply subject says of it: the event's
// stream sequence and the deliveries of it to the group, this one
// included.
type delivery struct{ seq, n uint64 }

// deliveryOf reads a delivery from its reply subject as
// jetstream.Msg.Metadata does (without the fields handle does not use,
// and their allocations): "$JS.ACK.<stream>.<consumer>.<delivered>.<stream
// seq>.<consumer seq>.<time>.<pending>", or with "<domain>.<account>."
// after "$JS.ACK." and a token at the end (11 tokens or more). ok is false
// for another form.
func deliveryOf(reply string) (d delivery, ok bool) {
	rest, ok := strings.CutPrefix(reply, "$JS.ACK.")
	if !ok {
		return d, false
	}
	skip := 2 // to the delivered count: stream, consumer
	switch tokens := strings.Count(rest, ".") + 3; {
	case tokens == 9:
	case tokens >= 11:
		skip = 4
	default:
		return d, false
	}
	for range skip {
		_, rest, _ = strings.Cut(rest, ".")
	}
	n, rest, _ := strings.Cut(rest, ".")
	seq, _, _ := strings.Cut(rest, ".")
	d = delivery{seq: parseNum(seq), n: parseNum(n)}
	return d, d.seq > 0 && d.n > 0
}

// parseNum is the decimal s, or 0.
func parseNum(s string) uint64 {
	if len(s) == 0 || len(s) > 19 {
		return 0
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0
		}
		n = n*10 + uint64(s[i]-'0')
	}
	return n
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
