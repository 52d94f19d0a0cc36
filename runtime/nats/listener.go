package nats

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/internal/bridge"
	"github.com/wizardmesh/wizard/runtime/internal/mux"
	"github.com/wizardmesh/wizard/runtime/internal/ratelog"
	"github.com/wizardmesh/wizard/runtime/internal/streamconn"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// Listener serves the calls sent to a node's subject.
type Listener struct {
	t       *Transport
	b       *broker
	subject string
	s       runtime.Server
	ss      streamconn.Server // s, when it serves streams; nil otherwise
	sub     *natsgo.Subscription
	log     *slog.Logger     // rate-limited: anyone who may publish on the subject can cause its records
	logh    *ratelog.Handler // nil when the transport logs nowhere
	ctx     context.Context  // ends on Close: every handler's ctx ends
	vals    context.Context  // ctx without its cancellation: the handlers' values (see callCtx)
	cancel  context.CancelFunc

	budget *mux.Budget // the node's in-flight limit, shared among callers; nil: none

	mu       sync.Mutex
	running  map[callKey]*serving     // by reply subject and id
	out      map[string]*batcher      // the replies to callers that batch, by their batch subjects
	shares   map[string]*mux.Share    // by caller (reply inbox), with budget
	streams  map[string]*serverStream // the streams open, by their subjects
	callers  map[string]*streamCaller // the callers with streams open, by reply inbox
	draining bool
	closed   bool
	idle     []*worker      // workers waiting for a call, the last to finish on top
	wg       sync.WaitGroup // the handlers running
	once     sync.Once
}

var _ runtime.Listener = (*Listener)(nil)

// callKey names a call being served: its reply subject, and in a batch
// its id too (0 otherwise).
type callKey struct {
	reply string
	id    uint64
}

// serving is a call being served.
type serving struct {
	ctx   *callCtx   // its handler's, in its job
	keep  bool       // runtime.FlagKeep: runs on if the broker connection is lost
	share *mux.Share // the caller's, taken; nil without a budget
}

// worker is a goroutine that serves calls one after another, so that a
// stack grown by one call serves the next ones too (a goroutine per call
// spends much of its time growing its stack).
type worker struct {
	next chan *job // capacity 1; nil: leave
}

// job is one call for a worker, with its state and message in the same
// allocation.
type job struct {
	ctx     callCtx // the handler's; its deadline is the call's
	s       serving
	reply   string   // "" for a no-reply call
	id      uint64   // the call's id in a batch, 0 if it came alone
	out     *batcher // its reply's, when it came in a batch (and wants one)
	m       runtime.Message
	noReply bool
}

// maxIdleWorkers bounds the workers a listener keeps waiting; one that
// finishes beyond it leaves.
const maxIdleWorkers = 256

// maxIdleShares is how many callers without calls in flight a listener
// keeps shares for (so that a caller between two calls keeps its part):
// past it, the shares of idle callers are dropped.
const maxIdleShares = 1024

func newListener(t *Transport, b *broker, subject string, s runtime.Server) (*Listener, error) {
	ctx, cancel := context.WithCancel(context.Background())
	l := &Listener{t: t, b: b, subject: subject, s: s, ctx: ctx, cancel: cancel, running: map[callKey]*serving{}, out: map[string]*batcher{}, shares: map[string]*mux.Share{}, streams: map[string]*serverStream{}, callers: map[string]*streamCaller{}, log: t.log, budget: bridge.Budget(s)}
	l.vals = context.WithoutCancel(ctx)
	l.ss, _ = s.(streamconn.Server)
	if t.log.Handler() != slog.DiscardHandler {
		l.logh = ratelog.NewHandler(t.log.Handler())
		l.log = slog.New(l.logh)
	}
	since := b.nc.LastError()
	sub, err := b.nc.Subscribe(subject, l.onMessage)
	if err != nil {
		cancel()
		return nil, err
	}
	_ = sub.SetPendingLimits(-1, 64<<20)
	l.sub = sub
	// Once the broker has the subscription, callers find the node; a
	// subscription the broker refused fails the Listen, before the node
	// is announced.
	fctx, fcancel := context.WithTimeout(context.Background(), dialTimeout)
	err = b.checked(fctx, since, opSubscribe, subject)
	fcancel()
	if err != nil {
		_ = sub.Unsubscribe()
		cancel()
		return nil, err
	}
	b.mu.Lock()
	b.listeners[l] = struct{}{}
	b.mu.Unlock()
	if l.ss != nil && t.streamKeepAlive > 0 {
		go l.watchCallers()
	}
	return l, nil
}

// Addr returns the subject the listener serves.
func (l *Listener) Addr() string { return l.subject }

// onMessage takes one message on the node's subject: one frame, or a
// batch of them. A malformed one is dropped whole with a rate-limited
// record: it never ends the listener.
func (l *Listener) onMessage(m *natsgo.Msg) {
	max := l.b.maxFrame()
	if err := checkBatch(m.Data, max); err != nil {
		l.log.Warn("wizard: nats: malformed message dropped", "subject", l.subject, "remote", m.Reply, "err", err.Error())
		return
	}
	for data := m.Data; len(data) > 0; {
		var f wire.Frame // its metadata goes on with the call
		var err error
		if data, err = nextFrame(data, max, &f); err != nil {
			// A message of one frame, or a new max_payload meanwhile.
			l.log.Warn("wizard: nats: malformed message dropped", "subject", l.subject, "remote", m.Reply, "err", err.Error())
			return
		}
		l.onFrame(m.Reply, &f)
	}
}

// onFrame takes one frame of a message on the node's subject, with the
// message's reply subject.
func (l *Listener) onFrame(reply string, f *wire.Frame) {
	switch f.Type {
	case wire.TypeRequest:
		l.request(reply, f.ID, f)
	case wire.TypePing:
		l.mu.Lock()
		closed, draining := l.closed, l.draining
		l.heardLocked(reply, false)
		l.mu.Unlock()
		switch {
		case closed || reply == "":
		case draining:
			l.publish(reply, &wire.Frame{Type: wire.TypeGoAway})
		default:
			l.publish(reply, &wire.Frame{Type: wire.TypePong, ID: batchVersion, Payload: l.features()})
		}
	case wire.TypePong: // a caller's, with streams open (see pingCaller)
		l.mu.Lock()
		l.heardLocked(reply, true)
		l.mu.Unlock()
	case wire.TypeStreamOpen:
		l.openStream(reply, f)
	case wire.TypeStreamData, wire.TypeStreamClose, wire.TypeStreamCredit:
		l.streamFrame(reply, f)
	case wire.TypeCancel:
		if reply != "" && l.cancelStream(reply) {
			return
		}
		l.mu.Lock()
		if s := l.running[callKey{reply, f.ID}]; s != nil && reply != "" {
			s.stop()
		}
		l.mu.Unlock()
	default:
		l.log.Warn("wizard: nats: malformed message dropped", "subject", l.subject, "remote", reply, "err", "a "+f.Type.String()+" frame on a node's subject")
	}
}

// features is the payload of the listener's pongs: the wire features it
// serves beyond calls (streams, when its server serves them). A caller
// that predates them ignores a pong's payload.
func (l *Listener) features() []byte {
	if l.ss == nil {
		return nil
	}
	return featureStreams
}

var featureStreams = []byte{byte(wire.FeatureStreams)}

// request starts serving a call, or refuses it; id is its id in a batch,
// 0 if it came alone.
func (l *Listener) request(reply string, id uint64, f *wire.Frame) {
	noReply := f.Flags&wire.FlagNoReply != 0 || reply == ""
	l.mu.Lock()
	var refuse string
	var code runtime.Code
	switch {
	case l.closed:
		l.mu.Unlock()
		return
	case l.draining:
		refuse, code = "wizard: nats: "+l.subject+": server is going away", runtime.CodeUnavailable
	case len(l.running) >= l.t.maxServing:
		refuse, code = "wizard: nats: "+l.subject+": serving too many calls", runtime.CodeResourceExhausted
	case !noReply && l.running[callKey{reply, id}] != nil:
		l.mu.Unlock()
		l.log.Warn("wizard: nats: malformed message dropped", "subject", l.subject, "remote", reply, "err", "a call with the reply subject of a call running")
		return
	}
	var share *mux.Share
	if refuse == "" && l.budget != nil {
		if share = l.shareLocked(callerOf(reply)); !share.Take() {
			share = nil
			refuse, code = "wizard: nats: "+l.subject+": over the caller's share of the in-flight limit", runtime.CodeResourceExhausted
		}
	}
	if refuse != "" {
		l.mu.Unlock()
		if !noReply {
			l.answer(reply, id, &wire.Frame{Type: wire.TypeError, Flags: wire.FlagRefused, Payload: wire.AppendError(nil, uint32(code), refuse)})
		}
		return
	}
	d := f.Deadline
	if d <= 0 {
		d = l.t.serveTimeout
	}
	j := &job{ctx: callCtx{base: l.ctx, vals: l.vals, end: time.Now().Add(d)}, s: serving{keep: f.Flags&wire.FlagKeep != 0, share: share}, reply: reply, id: id, noReply: noReply}
	j.s.ctx = &j.ctx
	if noReply {
		j.reply = "" // a no-reply call cannot be cancelled; it is not in running
	} else {
		l.running[callKey{reply, id}] = &j.s
		if id != 0 {
			j.out = l.batcherLocked(reply)
			j.out.active.Add(1)
		}
	}
	l.wg.Add(1)
	var w *worker // an idle one, if any
	if n := len(l.idle); n > 0 {
		w = l.idle[n-1]
		l.idle[n-1] = nil
		l.idle = l.idle[:n-1]
	}
	l.mu.Unlock()
	bridge.RequestMessage(&j.m, f)
	j.m.Remote = runtime.NewRemote("nats", callerOf(reply), nil)
	if w != nil {
		w.next <- j
		return
	}
	go l.work(j)
}

// work serves j, then the calls handed to it while it waits, until the
// listener closes or enough workers wait.
func (l *Listener) work(j *job) {
	w := &worker{next: make(chan *job, 1)}
	for j != nil {
		l.serve(j)
		l.mu.Lock()
		if l.closed || len(l.idle) >= maxIdleWorkers {
			l.mu.Unlock()
			return
		}
		l.idle = append(l.idle, w)
		l.mu.Unlock()
		j = <-w.next
	}
}

// shareLocked returns caller's share of the budget, making one if need
// be; l.mu is held.
func (l *Listener) shareLocked(caller string) *mux.Share {
	if sh := l.shares[caller]; sh != nil {
		return sh
	}
	if len(l.shares) >= maxIdleShares {
		for k, sh := range l.shares {
			if !sh.Busy() {
				sh.Close()
				delete(l.shares, k)
			}
		}
	}
	sh := l.budget.Share()
	l.shares[caller] = sh
	return sh
}

// callerOf is the calling end of a call, as far as the broker tells: its
// reply inbox, without the call's token.
func callerOf(reply string) string {
	if i := strings.LastIndexByte(reply, '.'); i > 0 {
		return reply[:i]
	}
	return reply
}

// stop cancels the call's ctx (the listener's mu is held).
func (s *serving) stop() { s.ctx.cancel(context.Canceled) }

// serve runs one call and publishes its reply.
func (l *Listener) serve(j *job) {
	s, reply, m, noReply := &j.s, j.reply, &j.m, j.noReply
	defer l.wg.Done()
	r := l.s.ServeMessage(&j.ctx, m)
	j.ctx.cancel(context.Canceled) // the handler has returned: its ctx ends
	if s.share != nil {
		s.share.Release()
	}
	l.mu.Lock()
	if reply != "" {
		delete(l.running, callKey{reply, j.id})
	}
	closed := l.closed
	l.mu.Unlock()
	if j.out != nil {
		defer j.out.active.Add(-1)
	}
	if closed || noReply {
		return
	}
	var f wire.Frame
	bridge.ReplyFrame(&f, r)
	if size, max := f.Size()-4, l.b.maxFrame(); size > max {
		f = wire.Frame{Type: wire.TypeError, Payload: wire.AppendError(nil, uint32(runtime.CodeResourceExhausted), "wizard: nats: "+l.subject+": reply too large for the broker")}
	}
	if j.out != nil {
		f.ID = j.id
		j.out.send(&f, 0)
		return
	}
	l.publish(reply, &f)
}

// answer sends f, a reply to the call id on reply: in a batch when the
// call came in one, in a message of its own otherwise.
func (l *Listener) answer(reply string, id uint64, f *wire.Frame) {
	if id == 0 {
		l.publish(reply, f)
		return
	}
	l.mu.Lock()
	out := l.batcherLocked(reply)
	l.mu.Unlock()
	f.ID = id
	out.send(f, 0)
}

// batcherLocked returns the batcher of the replies to subject, a
// caller's batch subject, making one if need be; l.mu is held. Past
// maxIdleShares callers, the batchers of callers with no calls being
// served and nothing to send are dropped.
func (l *Listener) batcherLocked(subject string) *batcher {
	if w := l.out[subject]; w != nil {
		return w
	}
	if len(l.out) >= maxIdleShares {
		for k, w := range l.out {
			if w.active.Load() == 0 && w.idle() {
				delete(l.out, k)
			}
		}
	}
	w := &batcher{nc: l.b.nc, subject: subject, limit: &l.b.batch, onErr: func(err error) {
		l.log.Debug("wizard: nats: replies not sent", "subject", l.subject, "reply", subject, "err", err)
	}}
	l.out[subject] = w
	return w
}

// publish sends f to subject; a failure (the broker connection is down)
// loses it, as a connection lost loses a reply.
func (l *Listener) publish(subject string, f *wire.Frame) {
	fb := encodePooled(f)
	err := l.b.nc.Publish(subject, fb.b)
	fb.free()
	if err != nil {
		l.log.Debug("wizard: nats: reply not sent", "subject", l.subject, "reply", subject, "err", err)
	}
}

// brokerLost cancels the calls being served, but those flagged
// runtime.FlagKeep, whose callers may send them again: their replies
// were lost with the connection. It ends the open streams as lost.
func (l *Listener) brokerLost() {
	l.mu.Lock()
	for _, s := range l.running {
		if !s.keep {
			s.stop()
		}
	}
	streams := make([]*serverStream, 0, len(l.streams))
	for _, ss := range l.streams {
		streams = append(streams, ss)
	}
	l.mu.Unlock()
	// Its streams end too: their callers' end with the broker connection
	// as well, and a stream is never carried on another connection.
	loseStreams(streams, bridge.Lost("wizard: nats: "+l.subject, errBrokerLost))
}

// Shutdown stops taking calls (those that come are refused as going
// away, so that their callers try another node), tells the callers, and
// waits for the calls running until ctx is done; then it closes.
func (l *Listener) Shutdown(ctx context.Context) error {
	l.mu.Lock()
	first := !l.draining && !l.closed
	l.draining = true
	l.mu.Unlock()
	if first {
		l.publish(controlSubject(l.subject), &wire.Frame{Type: wire.TypeGoAway})
	}
	idle := make(chan struct{})
	go func() { l.wg.Wait(); close(idle) }()
	select {
	case <-idle:
		// Every call was answered and every caller told to go: a closed
		// message could overtake the last replies (they travel on
		// another subject), so none is sent.
		l.close(false)
		return nil
	case <-ctx.Done():
		l.close(true)
		return ctx.Err()
	}
}

// Close stops at once: the calls running are cancelled and their replies
// never sent; the callers are told that their calls in flight are lost.
func (l *Listener) Close() error {
	l.close(true)
	return nil
}

// close closes the listener, telling its callers that their calls in
// flight are lost when tell is set.
func (l *Listener) close(tell bool) {
	l.once.Do(func() {
		l.mu.Lock()
		l.closed = true
		for _, w := range l.idle {
			w.next <- nil
		}
		l.idle = nil
		for k, sh := range l.shares {
			sh.Close()
			delete(l.shares, k)
		}
		l.mu.Unlock()
		l.cancel()
		_ = l.sub.Unsubscribe()
		if tell {
			l.publish(controlSubject(l.subject), &wire.Frame{Type: wire.TypeError, Payload: wire.AppendError(nil, uint32(runtime.CodeUnavailable), "closed")})
		}
		l.b.mu.Lock()
		delete(l.b.listeners, l)
		l.b.mu.Unlock()
		l.t.release(l.b)
		if l.logh != nil {
			l.logh.Close()
		}
	})
}
