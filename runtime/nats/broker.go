package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wizardmesh/wizard/runtime/internal/ratelog"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// broker is a transport's one connection to NATS, shared by its
// listeners and connections, with one reply subscription, <inbox>.*, for
// every call they make: a call's reply subject is <inbox>.<token>, with a
// token of its own.
type broker struct {
	t     *Transport
	nc    *natsgo.Conn
	log   *slog.Logger     // rate-limited: the broker's refusals can come once a call
	logh  *ratelog.Handler // nil when the transport logs nowhere
	inbox string           // the reply subjects' prefix, "<inbox>."
	sub   *natsgo.Subscription
	refs  int // under t.mu
	next  atomic.Uint64
	done  atomic.Bool  // closed by the transport: a disconnect is no loss
	max   atomic.Int64 // the largest frame that can travel (see maxFrame)
	batch atomic.Int64 // the largest batch that can travel: maxBatchBytes, or the broker's max_payload

	mu          sync.Mutex
	pending     map[uint64]*pending
	streams     map[uint64]*clientStream // the streams open, by id: their subject's last token
	conns       map[*Conn]struct{}
	listeners   map[*Listener]struct{}
	discoveries map[*Discovery]struct{}
}

// pending is a call, or a ping, waiting for its reply.
type pending struct {
	ch   chan answer // gets exactly one answer
	conn *Conn
}

// answer is what a pending call gets: a frame or an error.
type answer struct {
	f   wire.Frame
	err error // a transport error, worded with the connection's where
}

// errNoResponders is the reason of a call the broker answered with "no
// responders": nobody subscribes to the subject, so nobody saw the call.
var errNoResponders = errors.New("no node listens on the subject")

// errBrokerLost is the reason of the calls in flight when the broker
// connection failed.
var errBrokerLost = errors.New("the broker connection was lost")

// connect opens t's broker connection and its reply subscription.
func connect(t *Transport) (*broker, error) {
	b := &broker{t: t, log: t.log, pending: map[uint64]*pending{}, streams: map[uint64]*clientStream{}, conns: map[*Conn]struct{}{}, listeners: map[*Listener]struct{}{}, discoveries: map[*Discovery]struct{}{}}
	if t.log.Handler() != slog.DiscardHandler {
		b.logh = ratelog.NewHandler(t.log.Handler())
		b.log = slog.New(b.logh)
	}
	opts := append([]natsgo.Option{natsgo.MaxReconnects(-1)}, t.nopts...)
	if t.reconnectWait > 0 {
		opts = append(opts, natsgo.ReconnectWait(t.reconnectWait))
	}
	if t.maxReconnects > 0 {
		opts = append(opts, natsgo.MaxReconnects(t.maxReconnects))
	}
	opts = append(opts, t.extra...)
	opts = append(opts,
		natsgo.ReconnectBufSize(-1), // a call while disconnected is not sent, never held and sent late
		natsgo.DisconnectErrHandler(func(_ *natsgo.Conn, err error) { b.lost(err) }),
		natsgo.ReconnectHandler(func(nc *natsgo.Conn) {
			b.setMaxFrame() // another server may have another max_payload
			t.log.Info("wizard: nats: broker connection back", "url", nc.ConnectedUrlRedacted())
			b.reconnected()
		}),
		natsgo.ErrorHandler(b.onError),
	)
	nc, err := natsgo.Connect(t.urls, opts...)
	if err != nil {
		b.closeLog()
		return nil, fmt.Errorf("connect to %s: %w", t.urls, err)
	}
	b.nc = nc
	b.setMaxFrame()
	b.inbox = nc.NewInbox() + "."
	since := nc.LastError()
	b.sub, err = nc.Subscribe(b.inbox+"*", b.onReply)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
		err = b.checked(ctx, since, opSubscribe, b.inbox+"*")
		cancel()
	}
	if err != nil {
		b.close()
		return nil, fmt.Errorf("subscribe to the reply inbox: %w", err)
	}
	_ = b.sub.SetPendingLimits(-1, 64<<20)
	return b, nil
}

// onError takes an error the broker or nats.go reported asynchronously:
// a refusal under the connection's permissions, or another.
func (b *broker) onError(_ *natsgo.Conn, s *natsgo.Subscription, err error) {
	if pe := permissionError(err); pe != nil {
		b.denied(pe)
		return
	}
	subj := ""
	if s != nil {
		subj = s.Subject
	}
	b.log.Warn("wizard: nats: broker error", "subject", subj, "err", err)
}

// closeLog stops the rate limiter of the broker's records.
func (b *broker) closeLog() {
	if b.logh != nil {
		b.logh.Close()
	}
}

// close flushes what was published (a listener's last word) and closes
// the connection.
func (b *broker) close() {
	b.done.Store(true)
	if b.nc.IsConnected() {
		_ = b.nc.FlushTimeout(time.Second)
	}
	b.nc.Close()
	b.closeLog()
}

// maxFrame is the largest frame that can travel: the transport's limit or
// the broker's max_payload, whichever is smaller.
func (b *broker) maxFrame() int { return int(b.max.Load()) }

// setMaxFrame reads the broker's max_payload, on connecting.
func (b *broker) setMaxFrame() {
	b.batch.Store(maxBatchBytes)
	if mp := b.nc.MaxPayload(); mp > 0 && mp < maxBatchBytes {
		b.batch.Store(mp)
	}
	m := b.t.maxFrame
	if mp := int(b.nc.MaxPayload()) - 4; mp > 0 && mp < m {
		m = mp
	}
	b.max.Store(int64(m))
}

// register adds a pending call and returns its reply subject.
func (b *broker) register(p *pending) (uint64, string) {
	id := b.add(p)
	return id, b.inbox + strconv.FormatUint(id, 36)
}

// add adds a pending call and returns its id.
func (b *broker) add(p *pending) uint64 {
	id := b.next.Add(1)
	b.mu.Lock()
	b.pending[id] = p
	b.mu.Unlock()
	return id
}

// notSent answers the pending calls ids, whose requests could not be
// published, as not sent.
func (b *broker) notSent(ids []uint64, err error) {
	for _, id := range ids {
		if p := b.take(id); p != nil {
			p.ch <- answer{err: notSentError{err}}
		}
	}
}

// unregister removes a pending call, reporting whether it was still
// there: false means an answer is on its way to p.ch.
func (b *broker) unregister(id uint64) bool {
	b.mu.Lock()
	_, ok := b.pending[id]
	delete(b.pending, id)
	b.mu.Unlock()
	return ok
}

// take removes and returns the pending call id, or nil.
func (b *broker) take(id uint64) *pending {
	b.mu.Lock()
	p := b.pending[id]
	delete(b.pending, id)
	b.mu.Unlock()
	return p
}

// onReply hands a reply to its pending call. Replies no call waits for
// (late, or forged) are dropped.
func (b *broker) onReply(m *natsgo.Msg) {
	tok := m.Subject[min(len(b.inbox), len(m.Subject)):]
	if tok == batchToken {
		b.onBatch(m)
		return
	}
	id, err := strconv.ParseUint(tok, 36, 64)
	if err != nil {
		return
	}
	b.mu.Lock()
	p := b.pending[id]
	delete(b.pending, id)
	cs := b.streams[id]
	b.mu.Unlock()
	if cs != nil {
		b.onStream(cs, m)
		return
	}
	if p == nil {
		b.pong(m) // a node's ping for a stream that has ended here
		return
	}
	c := p.conn // nil for a listener's ping of a caller
	var a answer
	switch {
	case len(m.Data) == 0 && m.Header.Get("Status") == "503":
		a.err = errNoResponders
	default:
		if err := decodeFrame(m.Data, b.maxFrame(), &a.f); err != nil {
			a.err = fmt.Errorf("bad reply: %w", err)
			b.t.log.Warn("wizard: nats: malformed reply dropped", "subject", m.Subject, "err", err)
		}
		if c != nil {
			c.heard()
		}
	}
	p.ch <- a
}

// onBatch hands the replies in a batch to their pending calls; a
// malformed batch is dropped whole, and its calls wait on (until their
// deadlines, or the node is found silent).
func (b *broker) onBatch(m *natsgo.Msg) {
	if err := checkBatch(m.Data, b.maxFrame()); err != nil {
		b.t.log.Warn("wizard: nats: malformed reply dropped", "subject", m.Subject, "err", err)
		return
	}
	var heard *Conn // the connection last told it was heard from
	for data := m.Data; len(data) > 0; {
		var a answer
		var err error
		if data, err = nextFrame(data, b.maxFrame(), &a.f); err != nil {
			b.t.log.Warn("wizard: nats: malformed reply dropped", "subject", m.Subject, "err", err)
			return
		}
		p := b.take(a.f.ID)
		if p == nil {
			continue // late, or forged
		}
		if p.conn != heard && p.conn != nil {
			heard = p.conn
			heard.heard()
		}
		p.ch <- a
	}
}

// lost fails every call in flight and every connection when the broker
// connection fails: calls already published may have run (they are lost
// after being sent); the runtime dials again, and its calls are not sent
// until the connection is back.
func (b *broker) lost(err error) {
	if b.done.Load() {
		return
	}
	reason := errBrokerLost
	if err != nil {
		reason = fmt.Errorf("%w: %v", errBrokerLost, err)
	}
	b.t.log.Warn("wizard: nats: broker connection lost", "err", err)
	b.mu.Lock()
	pend := b.pending
	b.pending = map[uint64]*pending{}
	conns := make([]*Conn, 0, len(b.conns))
	for c := range b.conns {
		conns = append(conns, c)
	}
	ls := make([]*Listener, 0, len(b.listeners))
	for l := range b.listeners {
		ls = append(ls, l)
	}
	b.mu.Unlock()
	for _, p := range pend {
		p.ch <- answer{err: lostError{reason}}
	}
	for _, c := range conns {
		c.fail(reason)
	}
	for _, l := range ls {
		l.brokerLost()
	}
}

// reconnected has the discoveries on the connection rejoin the mesh:
// what was announced while it was away did not reach them.
func (b *broker) reconnected() {
	b.mu.Lock()
	ds := slices.Collect(maps.Keys(b.discoveries))
	b.mu.Unlock()
	for _, d := range ds {
		d.rejoin()
	}
}

// lostError marks an answer of a call lost after it was sent.
type lostError struct{ reason error }

func (e lostError) Error() string { return e.reason.Error() }
func (e lostError) Unwrap() error { return e.reason }
