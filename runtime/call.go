package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/patrun"
)

// The remote call: callRemote builds the message and loops over attempts,
// each to one target the balancer picks; remoteCall.next (retry.go)
// decides what an attempt's outcome means for the call.

const (
	// The node's own metadata keys start with ':', which callers' keys
	// cannot (see [Metadata]).
	metaCall   = ":i" // the call's id among the caller's calls, 8 bytes big-endian
	metaToken  = ":k" // with a call id: the caller's token for the peer called (see peer.token)
	metaCaller = ":c" // the calling node's id
	metaType   = ":t" // the protobuf full name of a CodecProto payload
	metaOver   = ":o" // Act with a protobuf message: the pattern Request.Get sees
	metaCalled = ":p" // a call to a glob pattern without :o: the pattern it was made with, for transports that route by it
)

func metaValue(meta []MetaPair, key string) string {
	for _, m := range meta {
		if m.Key == key {
			return m.Value
		}
	}
	return ""
}

// callRemote sends a call to one of a.r's peers, and to others as long as
// the outcomes of its attempts allow (see [remoteCall.next]).
func (n *Node) callRemote(ctx context.Context, a *callArgs) (Result, error) {
	r, cfg := a.r, a.cfg
	box := r.bal.Load()
	if box == nil || !r.hasPeers() || n.remote == nil {
		return n.notFound(r.pattern.String(), cfg)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return Result{}, toError(err)
	}
	if n.closed.Load() {
		return Result{}, errClosed()
	}
	om, err := n.outgoing(ctx, a)
	if err != nil {
		return Result{}, err
	}
	defer putOutMessage(om) // after the attempts: the last defer to run
	ctx, cancel := n.remote.callContext(ctx, cfg)
	defer cancel()
	n.remote.budget.deposit()
	c := getRemoteCall(n, r, &om.Message, cfg)
	defer putRemoteCall(c)
	for {
		t, ok := c.pick(box.b)
		if !ok {
			return c.giveUp(ctx)
		}
		switch s, res, err := c.next(ctx, c.attempt(ctx, box.b, t)); s {
		case stepDone:
			return res, err
		case stepGiveUp:
			return c.giveUp(ctx)
		}
	}
}

// outgoing encodes a.msg as the wire message of a call to a.r, with the
// metadata the node sends: its id, the payload's type, the pattern that
// overlays a protobuf message, the caller's metadata (see [Metadata]), and
// the call's id when it may be sent again; a call to a glob pattern that
// carries no overlay, the pattern it was made with (an ActE's: the
// handler gets the data alone, but a transport to a node that routes by
// the called pattern, as MicroWizard's actE does, sends it).
func (n *Node) outgoing(ctx context.Context, a *callArgs) (*outMessage, error) {
	r, msg, over, cfg := a.r, a.msg, a.over, a.cfg
	st := metaStateOf(ctx)
	if st != nil {
		if err := checkOutgoing(st); err != nil {
			return nil, err
		}
	}
	called := over == nil && r.pattern.HasGlob()
	if over != nil {
		if m, ok := msg.(map[string]any); ok {
			msg, over = merged(m, over), nil
		}
	}
	codec, payload, typ, body, err := encodeRequest(msg)
	if err != nil {
		return nil, err
	}
	if ts := r.types.Load(); ts != nil && typ != "" && typ != ts.in {
		// Every peer of the route said it takes another type.
		return nil, errWrongRequest(r.pattern.String(), ts.in, typ)
	}
	om := getOutMessage() // the message and room for its metadata, in one record
	m := &om.Message
	*m = Message{Pattern: r.pattern.String(), Codec: codec, Payload: payload, body: body.m, bodyLen: body.n}
	m.Meta = append(om.meta[:0], MetaPair{metaCaller, n.id})
	if typ != "" {
		m.Meta = append(m.Meta, MetaPair{metaType, typ})
	}
	if over != nil {
		m.Meta = append(m.Meta, MetaPair{metaOver, over.pattern.String()})
	}
	switch {
	case cfg.event != "":
		m.Pattern = cfg.eventPat
		m.Meta = append(m.Meta, MetaPair{metaEvent, cfg.event})
	case cfg.broadcast:
		m.Pattern = cfg.eventPat
		m.Meta = append(m.Meta, MetaPair{metaBroadcast, ""})
	case called:
		m.Meta = append(m.Meta, MetaPair{metaCalled, string(patrun.AppendCanonical(nil, a.pairs))})
	}
	if st != nil {
		m.Meta = append(m.Meta, st.out.pairs...)
	}
	if cfg.noReply {
		m.Flags |= FlagNoReply
	}
	if cfg.idempotent {
		m.Flags |= FlagIdempotent
	}
	if !cfg.noReply && !cfg.idempotent {
		// An id the call keeps if it is sent again: the serving node runs
		// it once however often it arrives.
		binary.BigEndian.PutUint64(om.id[:], n.callSeq.Add(1))
		m.Meta = append(m.Meta, MetaPair{metaCall, om.idString()}, MetaPair{metaToken, ""})
		m.Flags |= FlagKeep // the token, last, is the peer's: attempt sets it
	}
	return om, nil
}

// callContext bounds a remote call: by the call's [Timeout] when it is
// sooner than ctx's deadline, else by ctx's deadline, else by the node's
// default timeout.
func (r *remote) callContext(ctx context.Context, cfg *callConfig) (context.Context, context.CancelFunc) {
	timeout := r.defaultTimeout
	if cfg.timeout > 0 {
		timeout = cfg.timeout
	}
	// A deadline of ctx stands unless the call's own Timeout is sooner:
	// the clock is read only then.
	if dl, ok := ctx.Deadline(); !ok || cfg.timeout > 0 && time.Until(dl) > timeout {
		return context.WithTimeout(ctx, timeout)
	}
	return ctx, func() {}
}

// remoteCall is the state of one remote call across its attempts: what
// its picks skip, and what its attempts learnt. Pooled: a call allocates
// none of it.
type remoteCall struct {
	n      *Node
	r      *route
	m      *Message
	cfg    *callConfig
	refeed bool // sent again to the same run of its peer if its connection drops

	lastResort uint8   // 1: suspect peers may be picked (no other could be); 2: peers reported down too
	br         Breaker // the breaker of the target skip accepted last
	tried      []*peer
	buf        [4]*peer           // tried's first room
	skipFn     func(*Target) bool // skip, bound once: passing it allocates nothing

	attempts    int
	refused     int  // attempts refused without running
	overloaded  int  // of those, refused as overloaded
	withdrawn   bool // the retry budget paid for the next attempt
	mayHaveRun  bool // an attempt was lost after it was written
	lastErr     error
	lastRefusal *Error
	stalled     *peer // the last attempt was given up on its connection, which stays (see pick)
}

// pick chooses the next target: one not tried yet, connected, whose
// breaker permits a call, and neither suspect nor reported down unless
// only such peers are left.
func (c *remoteCall) pick(bal Balancer) (*Target, bool) {
	t, ok := bal.Pick(c.cfg.key, c.skipFn)
	for !ok && c.lastResort < 2 {
		// Suspect peers get calls only when no other peer can, and peers
		// reported down only when not even a suspect can.
		c.lastResort++
		t, ok = bal.Pick(c.cfg.key, c.skipFn)
	}
	if !ok && c.stalled != nil {
		// The last attempt was given up on a stalled connection, which
		// stays, and no other peer can take the call: it goes there
		// again (its peer may yet answer) rather than fail.
		p := c.stalled
		c.stalled = nil
		c.tried = slices.DeleteFunc(c.tried, func(q *peer) bool { return q == p })
		t, ok = bal.Pick(c.cfg.key, c.skipFn)
	}
	if !ok && c.withdrawn {
		c.n.remote.budget.refund() // no target left to retry on
	}
	c.withdrawn = false
	return t, ok
}

// skip rejects the targets pick passes over; for the one it accepts it
// holds the breaker permit it took.
func (c *remoteCall) skip(t *Target) bool {
	p := t.p
	if p.conn.Load() == nil || c.lastResort < 1 && p.suspect.Load() || c.lastResort < 2 && p.down.Load() || slices.Contains(c.tried, p) {
		return true
	}
	c.br = c.n.breaker(p)
	return !c.br.Allow()
}

// outcome is what one attempt learnt.
type outcome struct {
	kind  outcomeKind
	peer  *peer
	reply *Message
	err   error
}

type outcomeKind uint8

const (
	outAnswered outcomeKind = iota // the peer answered, with any code (or a NoReply call was sent)
	outRefused                     // the peer refused it without running it (FlagRefused)
	outUnsent                      // it surely never reached the peer (ErrNotSent)
	outCoded                       // the transport refused it with a code
	outLost                        // the connection was lost after it was written: it may have run
	outEnded                       // the caller's context ended
)

// attempt sends the call to t and tells t's breaker how it went.
func (c *remoteCall) attempt(ctx context.Context, bal Balancer, t *Target) outcome {
	if c.attempts > 0 {
		c.m.Flags |= FlagRetry
		c.n.stats.retries.Add(1)
	}
	c.attempts++
	p, br := t.p, c.br
	c.tried = append(c.tried, p)
	if c.refeed {
		c.m.Meta[len(c.m.Meta)-1].Value = p.token
	}
	start := p.load.begin()
	ctx = c.n.attemptStart(ctx, c, t)
	reply, err := c.n.callPeer(ctx, p, c.m, c.refeed)
	bal.Done(t)
	o := outcome{kind: classify(ctx, reply, err), peer: p, reply: reply, err: err}
	p.load.end(start, o.failed(ctx))
	o.report(ctx, br)
	c.n.attemptEnd(ctx, c, t, o)
	return o
}

func classify(ctx context.Context, reply *Message, err error) outcomeKind {
	switch {
	case err == nil && reply != nil && reply.Flags&FlagRefused != 0:
		return outRefused
	case err == nil:
		return outAnswered
	case ctx.Err() != nil:
		return outEnded
	case errors.Is(err, ErrNotSent):
		return outUnsent
	}
	var e *Error
	if errors.As(err, &e) {
		return outCoded
	}
	return outLost
}

// report tells br what the attempt learnt of its target: a failure for a
// transport error or a timeout, an open circuit for an overload answer
// (the target shed the call), a success otherwise.
func (o outcome) report(ctx context.Context, br Breaker) {
	switch o.kind {
	case outRefused:
		switch o.reply.Code {
		case CodeResourceExhausted:
			br.Open()
		case CodeNotFound, CodeInvalidArgument:
			br.Success() // its catalog changed, or it takes another type; nothing wrong with it
		default:
			br.Failure()
		}
	case outEnded:
		if ctx.Err() == context.DeadlineExceeded {
			br.Failure() // a timeout counts against the target
		} else {
			br.Success() // the caller gave up: nothing learnt of the target
		}
	case outUnsent, outLost:
		br.Failure()
	default:
		br.Success()
	}
}

// failed reports whether the attempt failed for a reason of its target's,
// as the breaker's Failure and Open do: the target's load counts it as a
// slow answer.
func (o outcome) failed(ctx context.Context) bool {
	switch o.kind {
	case outRefused:
		return o.reply.Code != CodeNotFound && o.reply.Code != CodeInvalidArgument
	case outEnded:
		return ctx.Err() == context.DeadlineExceeded
	case outUnsent, outLost:
		return true
	}
	return false
}

// answer is the result of a call its peer answered.
func answer(reply *Message, types *peerTypes) (Result, error) {
	if reply == nil { // NoReply
		return Result{}, nil
	}
	if reply.Code != CodeOK {
		e := &Error{Code: reply.Code, Message: reply.Error}
		if len(reply.Payload) > 0 {
			e.Details = decodeDetails(reply.Payload)
		}
		return Result{}, e
	}
	if reply.Codec == CodecNone && len(reply.Payload) == 0 {
		return Result{}, nil // nil, as in-process
	}
	// The payload decodes lazily, into the type the caller asks for; the
	// raw view lives in the reply, so boxing it allocates nothing.
	reply.in = raw{codec: reply.Codec, data: reply.Payload, typ: metaValue(reply.Meta, metaType), types: types, pool: reply.in.pool}
	return Result{v: &reply.in}, nil
}
