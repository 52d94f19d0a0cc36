package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/wizardmesh/wizard/runtime/internal/patrun"
	"github.com/wizardmesh/wizard/runtime/internal/streamconn"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
	"github.com/wizardmesh/wizard/runtime/pattern"
	"google.golang.org/protobuf/proto"
)

// The node's side of streams: opening one (in-process or to a target the
// balancer picks), serving one for a transport, and ending those still
// open when a shutdown's grace ends.

// OpenStream opens a stream to the handler of pattern (one added with
// [NewStreamHandler]): in-process when this node has it, else on a target
// the balancer picks among those whose breakers allow it. Nothing is
// retried once the stream is open. Send takes what [Node.Act] takes (a
// map, JSON bytes, a protobuf message); Recv returns each answer as a
// [Result].
//
// ctx bounds the stream: its metadata ([AppendMetadata]) goes with the
// open, its deadline reaches the handler, and when it ends the stream is
// cancelled on both sides. The node's default timeout and the [Timeout]
// option do not apply: a stream lasts as long as ctx lets it.
func (n *Node) OpenStream(ctx context.Context, pattern string, opts ...CallOption) (*ClientStream[any, Result], error) {
	p, err := patrun.Parse(pattern)
	if err != nil {
		return nil, err
	}
	c, err := n.openStream(ctx, p, "", configOf(opts))
	if err != nil {
		return nil, err
	}
	return &ClientStream[any, Result]{c: c}, nil
}

// Stream opens a stream to the client's pattern, as [Node.OpenStream]
// does, whose messages are *Req one way and *Res the other.
func (c *Client[Req, Res]) Stream(ctx context.Context, opts ...CallOption) (*ClientStream[*Req, *Res], error) {
	if c.node == nil {
		o, ok := c.caller.(interface {
			OpenStream(context.Context, string, ...CallOption) (*ClientStream[any, Result], error)
		})
		if !ok {
			return nil, Errorf(CodeUnimplemented, "wizard: %T cannot open streams: build the client on a *runtime.Node", c.caller)
		}
		s, err := o.OpenStream(ctx, c.parsed.pattern.String(), append(c.opts[:len(c.opts):len(c.opts)], opts...)...)
		if err != nil {
			return nil, err
		}
		st := &ClientStream[*Req, *Res]{c: s.c}
		if _, ok := any((*Res)(nil)).(proto.Message); ok {
			st.newRes = func() *Res { return new(Res) }
		}
		return st, nil
	}
	cfg := &c.cfg
	if len(opts) > 0 {
		cfg = configOf(append(c.opts[:len(c.opts):len(c.opts)], opts...))
	}
	s, err := c.node.openStream(ctx, c.parsed.pattern, protoName[Req](), cfg)
	if err != nil {
		return nil, err
	}
	st := &ClientStream[*Req, *Res]{c: s}
	if _, ok := any((*Res)(nil)).(proto.Message); ok {
		st.newRes = func() *Res { return new(Res) }
	}
	return st, nil
}

// openStream opens a stream to p's handler; typ is the protobuf type of
// the messages the caller sends, when it is known.
func (n *Node) openStream(ctx context.Context, p pattern.Pattern, typ string, cfg *callConfig) (clientCore, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return nil, toError(err)
	}
	if n.closed.Load() {
		return nil, errClosed()
	}
	r := n.findRoute(p)
	if r == nil {
		_, err := n.notFound(p.String(), cfg)
		return nil, err
	}
	if e := r.local.Load(); e != nil {
		return n.openLocal(ctx, e)
	}
	return n.openRemote(ctx, r, typ, cfg)
}

// openLocal runs the stream's handler e on a goroutine of its own.
func (n *Node) openLocal(ctx context.Context, e *handlerEntry) (clientCore, error) {
	if !e.stream {
		return nil, errStreamToUnary(e.pattern.String())
	}
	sctx, stop := context.WithCancel(ctx)
	hctx, err := inProcessContext(sctx) // the caller's metadata, incoming
	if err != nil {
		stop()
		return nil, err
	}
	s := &localStream{
		ctx: sctx, stop: stop,
		up: make(chan any, streamQueue), down: make(chan any, streamQueue),
		hdr: make(chan struct{}), done: make(chan struct{}),
	}
	srv := localServer{s}
	go func() {
		srv.finish(n.runStream(hctx, e, nil, func(ctx context.Context) serverSide {
			s.hctx = ctx
			return srv
		}))
	}()
	return s, nil
}

// openRemote opens the stream on a target r's balancer picks: the first
// whose connection opens it. A target whose transport carries no streams
// is passed over.
func (n *Node) openRemote(ctx context.Context, r *route, typ string, cfg *callConfig) (clientCore, error) {
	box := r.bal.Load()
	if box == nil || !r.hasPeers() || n.remote == nil {
		_, err := n.notFound(r.pattern.String(), cfg)
		return nil, err
	}
	var m Message // the picks' record; a stream has no call message
	c := getRemoteCall(n, r, &m, cfg)
	defer putRemoteCall(c)
	var lastErr error
	noStreams := 0 // targets whose transport carries no streams
	for {
		t, ok := c.pick(box.b)
		if !ok {
			break
		}
		p, br := t.p, c.br
		c.tried = append(c.tried, p)
		box.b.Done(t)
		conn := p.conn.Load()
		if conn == nil {
			br.Success() // nothing learnt of it
			continue
		}
		op, ok := conn.c.(streamconn.Opener)
		if !ok {
			br.Success()
			noStreams++
			continue
		}
		a := Attempt{Pattern: r.pattern, Target: t, N: len(c.tried), Stream: true}
		actx := ctx
		if n.obs.o != nil {
			actx = n.obs.o.AttemptStart(ctx, a)
		}
		open, err := streamOpen(actx, r, n.id, typ)
		if err != nil {
			br.Success()
			if n.obs.o != nil {
				n.obs.o.AttemptEnd(actx, a, AttemptResult{Code: CodeOf(err), Err: err})
			}
			return nil, err
		}
		// The transport's stream watches actx itself (it tells the server
		// when actx ends) and Cancel ends it: no context of its own.
		cs, err := op.OpenStream(actx, open)
		if err != nil {
			if n.obs.o != nil {
				n.obs.o.AttemptEnd(actx, a, AttemptResult{Code: CodeOf(err), Err: err})
			}
			if ctx.Err() != nil {
				br.Success()
				return nil, toError(ctx.Err())
			}
			if errors.Is(err, streamconn.ErrUnsupported) {
				br.Success()
			} else {
				br.Failure()
			}
			lastErr = fmt.Errorf("%s: %w", p.addr, err)
			continue
		}
		rs := &remoteStream{ctx: actx, cs: cs, addr: p.addr, types: n.peerTypes, br: br}
		if n.obs.o != nil {
			obs := n.obs.o
			rs.observe = func(r AttemptResult) { obs.AttemptEnd(actx, a, r) }
		}
		return rs, nil
	}
	if noStreams > 0 && noStreams == len(c.tried) {
		// A bridge to MicroWizard or Seneca: request/response only.
		return nil, Errorf(CodeUnimplemented, "wizard: no stream to %s: the %s transport carries no streams, only calls", quoteClipped(r.pattern.String(), maxEcho), n.remote.transport.Name())
	}
	if lastErr == nil {
		lastErr = errors.New("no target is connected: " + listPeers(n.routeStates(r)))
	}
	return nil, &Error{Code: CodeUnavailable, Message: fmt.Sprintf("wizard: no peer serving %s could open the stream (%d tried): %v", quoteClipped(r.pattern.String(), maxEcho), len(c.tried), lastErr), cause: lastErr}
}

// streamOpen is the open frame of a stream to r: the caller's id, the
// type of its messages when known, and ctx's metadata.
func streamOpen(ctx context.Context, r *route, id, typ string) (*wire.Frame, error) {
	meta := []wire.Meta{{Key: metaCaller, Value: id}}
	if typ != "" {
		meta = append(meta, wire.Meta{Key: metaType, Value: typ})
	}
	if st := metaStateOf(ctx); st != nil {
		if err := checkOutgoing(st); err != nil {
			return nil, err
		}
		for _, p := range st.out.pairs {
			meta = append(meta, wire.Meta{Key: p.Key, Value: p.Value})
		}
	}
	return &wire.Frame{Type: wire.TypeStreamOpen, Pattern: r.pattern.String(), Meta: meta}, nil
}

// ServeStream serves a stream another node opened, for the transport: it
// runs the stream's handler and returns the stream's end.
func (s nodeServer) ServeStream(ctx context.Context, st streamconn.Stream) error {
	return s.n.serveStream(ctx, st)
}

var _ streamconn.Server = nodeServer{}

func (n *Node) serveStream(ctx context.Context, st streamconn.Stream) error {
	open := st.Open()
	m := &Message{Pattern: open.Pattern, Meta: metaPairs(open.Meta), Deadline: open.Deadline}
	if rs, ok := st.(interface{ Remote() *Remote }); ok {
		m.Remote = rs.Remote() // what the transport knows of the caller, as for a call
	}
	if err := n.limits.checkMeta(m.Meta); err != nil {
		return endOf(err, true)
	}
	if err := forgedCaller(m); err != nil {
		return endOf(err, true)
	}
	e, err := n.wireHandler(m.Pattern)
	if err != nil {
		return endOf(err, true)
	}
	if e == nil {
		return endOf(Errorf(CodeNotFound, "wizard: the remote node has no handler for %s", quoteClipped(m.Pattern, maxEcho)), true)
	}
	if !e.stream {
		return endOf(errStreamToUnary(e.pattern.String()), true)
	}
	hctx := remoteContext(ctx, m)
	reqType := metaValue(m.Meta, metaType)
	err = n.runStream(hctx, e, m, func(ctx context.Context) serverSide {
		return &remoteServer{ctx: ctx, st: st, reqType: reqType, call: m}
	})
	return endOf(err, err == errClosing)
}

// runStream runs e's handler on a stream whose serving side side makes
// from the handler's ctx. A shutdown waits for it within its grace, then
// ends it. Streams take no slot of [WithMaxInFlight]'s, which bounds
// calls: an idle stream must not shed calls. A transport bounds the
// streams of each connection.
func (n *Node) runStream(ctx context.Context, e *handlerEntry, call *Message, side func(context.Context) serverSide) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	id := n.streams.add(cancel)
	defer n.streams.remove(id)
	if n.closed.Load() { // after add: a shutdown either waits for it or it sees closed
		return errClosing
	}
	ss := &serverStream{serverSide: side(ctx), entry: e, node: n, call: call}
	_, err := n.serve(ctx, e, Request{msg: ss, entry: e, node: n})
	if context.Cause(ctx) == errStreamsShutdown {
		return errStreamsShutdown
	}
	return err
}

// streamSet holds the cancel functions of the streams a node serves, so
// that a shutdown waits for them, then ends those its grace left open.
type streamSet struct {
	mu    sync.Mutex
	next  uint64
	m     map[uint64]context.CancelCauseFunc
	empty chan struct{} // closed when m becomes empty while someone waits
}

func (s *streamSet) add(cancel context.CancelCauseFunc) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[uint64]context.CancelCauseFunc)
	}
	s.next++
	s.m[s.next] = cancel
	return s.next
}

func (s *streamSet) remove(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
	if len(s.m) == 0 && s.empty != nil {
		close(s.empty)
		s.empty = nil
	}
}

// wait returns nil once no stream is open, or ctx's error.
func (s *streamSet) wait(ctx context.Context) error {
	s.mu.Lock()
	if len(s.m) == 0 {
		s.mu.Unlock()
		return nil
	}
	if s.empty == nil {
		s.empty = make(chan struct{})
	}
	ch := s.empty
	s.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// cancelAll ends every stream the node serves with err.
func (s *streamSet) cancelAll(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cancel := range s.m {
		cancel(err)
	}
}

// errStreamsShutdown ends the streams still open when a node's shutdown
// grace ends.
var errStreamsShutdown = &Error{Code: CodeUnavailable, Message: "wizard: the node shut down before the stream ended", cause: ErrClosed}
