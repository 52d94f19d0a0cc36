package runtime

import (
	"context"
	"sync"

	"github.com/wizardmesh/wizard/runtime/pattern"
)

// Observer is told what a node's calls go through beyond what
// interceptors see: each attempt of a remote call and the target it goes
// to, calls sent again after their connection dropped, calls refused
// without running their handler, and copies answered from the
// de-duplication table. [WithObserver] sets one; tracing and metrics
// (github.com/wizardmesh/wizard/otel) are built on it and on the
// interceptors.
//
// The node calls an Observer on its call paths, from many goroutines at
// once: its methods must be safe for concurrent use and quick. A node
// without one pays a nil check at those points. Embed [NopObserver] to
// implement only some of the methods.
type Observer interface {
	// Observe is called once by [New] with the node, before New returns
	// it; the function it returns, if not nil, is called once when the
	// node has stopped ([Node.Shutdown], [Node.Close]) or New fails.
	Observe(n *Node) (stop func())
	// AttemptStart is called before an attempt of a remote call is sent
	// to its target, with the call's ctx (the one its call interceptors
	// passed on). The ctx it returns is the attempt's: the node sends the
	// attempt with it and gives it to AttemptEnd and to the attempt's
	// events.
	AttemptStart(ctx context.Context, a Attempt) context.Context
	// AttemptEnd is called when the attempt is over, with how it ended.
	AttemptEnd(ctx context.Context, a Attempt, r AttemptResult)
	// Event is called at the moments an [EventKind] names.
	Event(ctx context.Context, e Event)
}

// Attempt is one attempt of a remote call, as an [Observer] sees it.
type Attempt struct {
	// Pattern is the pattern of the route the call took: the one the
	// target serves.
	Pattern pattern.Pattern
	// Target is the peer the attempt goes to.
	Target *Target
	// N counts the call's attempts: 1 for the first; more for the
	// retries, each to another target.
	N int
	// Stream: the attempt opens a stream ([Node.OpenStream]). It lasts
	// until the stream ends, and its result counts the stream's messages.
	Stream bool
	// Event: the attempt delivers an event ([Node.Emit],
	// [Node.Broadcast]). Pattern is then the event's pairs that the
	// target's subscriptions test (the event's other fields travel in its
	// payload), and Group the group it goes to ("" for a broadcast, which
	// runs every matching subscription of the target).
	Event bool
	Group string
}

// AttemptResult is how an attempt ended.
type AttemptResult struct {
	// Code is the answer's code (CodeOK for a result), the refusal's, or
	// the code of the error the attempt failed with.
	Code Code
	// Refused: the target refused the call without running it (over its
	// in-flight limit, closing, or serving no longer the pattern); the
	// node may try another target.
	Refused bool
	// Err is the transport's error or the end of the call's ctx; nil for
	// an answer or a refusal, whatever their code.
	Err error
	// Sent and Received count, for a stream, the messages the caller sent
	// and received.
	Sent, Received int64
}

// EventKind names what an [Event] reports.
type EventKind uint8

const (
	// EventRefeed: a caller sent a call again, same id, to the same run of
	// its target after the connection dropped (Target set; the ctx is the
	// attempt's).
	EventRefeed EventKind = iota + 1
	// EventRefused: a serving node refused a call without running its
	// handler, as over its in-flight limit ([WithMaxInFlight]) or closing
	// (Spec and Code set; the ctx is the one the handler would have had,
	// with the caller's metadata).
	EventRefused
	// EventDuplicate: a serving node received a call again and answers it
	// from its de-duplication table, joining the running call or with the
	// stored answer, without running the handler (Spec set; the ctx
	// carries the copy's metadata).
	EventDuplicate
)

// String returns the kind's name: "refeed", "refused", "duplicate".
func (k EventKind) String() string {
	switch k {
	case EventRefeed:
		return "refeed"
	case EventRefused:
		return "refused"
	case EventDuplicate:
		return "duplicate"
	}
	return "unknown"
}

// Event is something a node's call went through, for an [Observer].
type Event struct {
	Kind EventKind
	// Spec is the handler's, for the events of a serving node.
	Spec Spec
	// Target is the peer called, for the events of a caller.
	Target *Target
	// Code is the refusal's code, for EventRefused.
	Code Code
}

// NopObserver is an [Observer] that does nothing: embed it to implement
// only some of the methods.
type NopObserver struct{}

// Observe does nothing.
func (NopObserver) Observe(*Node) func() { return nil }

// AttemptStart returns ctx.
func (NopObserver) AttemptStart(ctx context.Context, _ Attempt) context.Context { return ctx }

// AttemptEnd does nothing.
func (NopObserver) AttemptEnd(context.Context, Attempt, AttemptResult) {}

// Event does nothing.
func (NopObserver) Event(context.Context, Event) {}

var _ Observer = NopObserver{}

// WithObserver makes the node tell o what its calls go through (see
// [Observer]). A nil o means none.
func WithObserver(o Observer) Option {
	return nodeOption(func(c *nodeConfig) { c.observer = o })
}

// observing is a node's observer and the function that stops it.
type observing struct {
	o        Observer
	stop     func()
	stopOnce sync.Once
}

// observe attaches o to n (New).
func (n *Node) observe(o Observer) {
	if o == nil {
		return
	}
	n.obs.o = o
	n.obs.stop = o.Observe(n)
}

// unobserve stops n's observer, once.
func (n *Node) unobserve() {
	n.obs.stopOnce.Do(func() {
		if n.obs.stop != nil {
			n.obs.stop()
		}
	})
}

// attemptStart tells the observer of c's attempt to t. (The nil check
// inlines at the call; the rest does not.)
func (n *Node) attemptStart(ctx context.Context, c *remoteCall, t *Target) context.Context {
	if n.obs.o == nil {
		return ctx
	}
	return n.observeAttemptStart(ctx, c, t)
}

//go:noinline
func (n *Node) observeAttemptStart(ctx context.Context, c *remoteCall, t *Target) context.Context {
	return n.obs.o.AttemptStart(ctx, c.observed(t))
}

// observed is c's attempt to t as an Observer sees it.
func (c *remoteCall) observed(t *Target) Attempt {
	a := Attempt{Pattern: c.r.pattern, Target: t, N: c.attempts}
	if c.cfg.event != "" || c.cfg.broadcast {
		a.Event, a.Group, a.Pattern = true, c.cfg.event, c.cfg.eventP
	}
	return a
}

// attemptEnd tells the observer how c's attempt to t ended.
func (n *Node) attemptEnd(ctx context.Context, c *remoteCall, t *Target, o outcome) {
	if n.obs.o != nil {
		n.observeAttemptEnd(ctx, c, t, o)
	}
}

func (n *Node) observeAttemptEnd(ctx context.Context, c *remoteCall, t *Target, o outcome) {
	n.obs.o.AttemptEnd(ctx, c.observed(t), o.result(ctx))
}

// result is what an Observer learns of the outcome.
func (o outcome) result(ctx context.Context) AttemptResult {
	switch o.kind {
	case outAnswered:
		if o.reply == nil {
			return AttemptResult{} // NoReply: sent
		}
		return AttemptResult{Code: o.reply.Code}
	case outRefused:
		return AttemptResult{Code: o.reply.Code, Refused: true}
	case outEnded:
		return AttemptResult{Code: CodeOf(ctx.Err()), Err: ctx.Err()}
	case outCoded:
		return AttemptResult{Code: CodeOf(o.err), Err: o.err}
	}
	return AttemptResult{Code: CodeUnavailable, Err: o.err}
}

// observeRefeed tells the observer that a call is sent again to p.
func (n *Node) observeRefeed(ctx context.Context, p *peer) {
	if n.obs.o != nil {
		n.obs.o.Event(ctx, Event{Kind: EventRefeed, Target: &p.target})
	}
}

// observeRefused tells the observer that a call of e was refused with err
// without running.
func (n *Node) observeRefused(ctx context.Context, e *handlerEntry, err *Error) {
	if n.obs.o != nil {
		n.obs.o.Event(ctx, Event{Kind: EventRefused, Spec: Request{entry: e}.Spec(), Code: err.Code})
	}
}

// observeDuplicate tells the observer that the call m of e is a copy
// answered from the de-duplication table.
func (n *Node) observeDuplicate(ctx context.Context, m *Message, e *handlerEntry) {
	if n.obs.o != nil {
		n.obs.o.Event(remoteContext(ctx, m), Event{Kind: EventDuplicate, Spec: Request{entry: e}.Spec()})
	}
}
