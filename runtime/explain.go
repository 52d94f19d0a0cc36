package runtime

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wizardmesh/wizard/runtime/internal/patrun"
	"github.com/wizardmesh/wizard/runtime/introspect"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// Explanation says how a node routes one message: the pattern that wins
// by Seneca's precedence, every other added pattern that matches it, in
// the order they would answer were the ones before them removed, each
// with the reason it lost, and the targets of the winner with what the
// node knows of them. [Node.Explain] makes one.
type Explanation struct {
	// Message is the routed pairs of the message explained.
	Message pattern.Pattern
	// Found: some added pattern matches the message.
	Found bool
	// Candidates are the added patterns that match the message: the
	// winner first (when Found), then the others in precedence order.
	Candidates []pattern.Candidate
	// Local: the winner has a handler on this node, which takes every
	// call (a node never sends a call it can serve itself).
	Local bool
	// Targets are the peers serving the winner, by address.
	Targets []introspect.TargetState
	// Request and Response are the protobuf full names the winner's peers
	// all list for it ("" when untyped or when they differ).
	Request, Response string
	// Balancer names how the node picks among Targets: "default"
	// (latency-aware power of two choices) or the Go type of the balancer
	// given to [WithBalancer].
	Balancer string
	// Next is the address of the target the balancer is expected to pick
	// next, "" when it cannot say (or there is no target); NextReason says
	// why, or why it cannot say.
	Next       string
	NextReason string
	// Refused is the error a call would fail with now without being sent
	// (nothing matches, no target connected, every breaker open, the node
	// closed); nil when a call would be sent or served.
	Refused *Error
}

// Explain explains how the node routes a call whose routed pairs are
// pattern's (as [Node.ActE] with that pattern routes it, or [Node.Act]
// with a message of those root fields). It only reads: it takes no
// breaker permit and sends nothing. A malformed pattern is an error.
func (n *Node) Explain(pattern string) (Explanation, error) {
	p, err := patrun.Parse(pattern)
	if err != nil {
		return Explanation{}, err
	}
	return n.explain(patrun.PairsOf(p)), nil
}

// ExplainMessage is [Node.Explain] for a message: a map or a JSON object,
// whose root scalar fields route.
func (n *Node) ExplainMessage(msg any) (Explanation, error) {
	var m map[string]any
	switch v := msg.(type) {
	case map[string]any:
		m = v
	case []byte:
		if err := json.Unmarshal(v, &m); err != nil {
			return Explanation{}, Errorf(CodeInvalidArgument, "wizard: Explain: the message is not a JSON object: %v", err)
		}
	case string:
		if err := json.Unmarshal([]byte(v), &m); err != nil {
			return Explanation{}, Errorf(CodeInvalidArgument, "wizard: Explain: the message is not a JSON object: %v", err)
		}
	default:
		return Explanation{}, Errorf(CodeInvalidArgument, "wizard: Explain: a message is a map[string]any or a JSON object, not %T", msg)
	}
	return n.explain(patrun.MapPairs(nil, m)), nil
}

func (n *Node) explain(pairs []pattern.Pair) Explanation {
	x := Explanation{Message: patrun.New(clonePairs(pairs))}
	x.Candidates = patrun.Candidates(n.router, pairs)
	if len(x.Candidates) == 0 || x.Candidates[0].Rank != 1 {
		x.Refused = n.refusal(nil, x.Message.String())
		return x
	}
	x.Found = true
	re := n.exactRoute(x.Candidates[0].Pattern)
	if re == nil { // removed since
		x.Refused = n.refusal(nil, x.Message.String())
		return x
	}
	n.explainRoute(&x, re)
	return x
}

// explainRoute fills in x what the node knows of r's targets.
func (n *Node) explainRoute(x *Explanation, r *route) {
	x.Local = r.local.Load() != nil
	x.Request, x.Response = routeTypes(r)
	if n.remote == nil {
		x.Refused = n.refusal(r, "")
		return
	}
	x.Targets = n.targetStates(r)
	peers := sortedPeers(r)
	now := clock()
	x.Refused = n.refusal(r, "")
	if x.Local || len(peers) == 0 {
		return
	}
	box := r.bal.Load()
	if box == nil {
		return
	}
	if _, ok := box.b.(*latencyBalancer); !ok {
		x.Balancer = fmt.Sprintf("%T", box.b)
		x.NextReason = "the balancer " + x.Balancer + " does not say which target it picks next"
		return
	}
	x.Balancer = "default"
	n.explainNext(x, peers, now)
}

// Route returns the route of exactly pattern (not the best match: see
// [Node.Explain]) and whether the node's routing has it.
func (n *Node) Route(pattern string) (introspect.Route, bool, error) {
	p, err := patrun.Parse(pattern)
	if err != nil {
		return introspect.Route{}, false, err
	}
	re := n.exactRoute(p)
	if re == nil {
		return introspect.Route{}, false, nil
	}
	r := re
	out := introspect.Route{Pattern: p, Local: r.local.Load() != nil, Targets: n.targetStates(r)}
	out.Request, out.Response = routeTypes(r)
	return out, true, nil
}

// sortedPeers returns r's peers by address.
func sortedPeers(r *route) []*peer {
	var peers []*peer
	if ps := r.peers.Load(); ps != nil {
		peers = slices.Clone(*ps)
	}
	slices.SortFunc(peers, func(a, b *peer) int { return strings.Compare(a.addr, b.addr) })
	return peers
}

// targetStates returns what the node knows of r's peers, by address.
func (n *Node) targetStates(r *route) []introspect.TargetState {
	if n.remote == nil {
		return nil
	}
	peers := sortedPeers(r)
	if len(peers) == 0 {
		return nil
	}
	now := clock()
	own := n.remote.transport.Name()
	out := make([]introspect.TargetState, 0, len(peers))
	n.remote.mu.Lock()
	defer n.remote.mu.Unlock()
	for _, p := range peers {
		t := introspect.TargetState{ID: p.id, Addr: p.addr, Transport: own, Connected: p.conn.Load() != nil,
			Suspect: p.suspect.Load(), Down: p.down.Load(), InFlight: int(p.load.inFlight.Load())}
		lat, stalled := p.load.expect(now)
		t.Latency, t.Stalled = time.Duration(lat), stalled
		if e := p.dialErr.Load(); e != nil && !t.Connected {
			t.LastError = *e
		}
		t.Breaker = breakerState(p)
		out = append(out, t)
	}
	return out
}

// routeTypes are the message types of r: its local handler's, else those
// its peers all list.
func routeTypes(r *route) (string, string) {
	if e := r.local.Load(); e != nil {
		return e.types.in, e.types.out
	}
	if ts := r.types.Load(); ts != nil {
		return ts.in, ts.out
	}
	return "", ""
}

// explainNext says which of peers the default balancer is expected to
// pick next: it draws two at random, so it can name only the cheapest,
// which wins every draw it is in.
func (n *Node) explainNext(x *Explanation, peers []*peer, now int64) {
	var ok []weighted
	for _, lr := range []uint8{0, 1, 2} {
		for _, p := range peers {
			if pickable(p, lr) {
				ok = append(ok, weighted{&p.target, 1})
			}
		}
		if len(ok) > 0 {
			break
		}
	}
	switch len(ok) {
	case 0:
		x.NextReason = "no target can take a call now"
		return
	case 1:
		x.Next = ok[0].t.p.addr
		x.NextReason = "the only target that can take a call now"
		return
	}
	best := ok[0]
	for _, w := range ok[1:] {
		if cheaper(w, best, now) {
			best = w
		}
	}
	strict := true
	for _, w := range ok {
		if w.t != best.t && !cheaper(best, w, now) {
			strict = false
		}
	}
	if !strict {
		x.NextReason = fmt.Sprintf("the default balancer draws two of the %d targets that can take a call at random and sends to the cheaper (stalled or 2x slower loses, else fewer calls in flight); none is cheaper than all the others now, so the next pick is random", len(ok))
		return
	}
	x.Next = best.t.p.addr
	if len(ok) == 2 {
		x.NextReason = fmt.Sprintf("the default balancer draws two targets at random and sends to the cheaper (stalled or 2x slower loses, else fewer calls in flight): with two, both are drawn every time, and %s is the cheaper now", best.t.p.addr)
		return
	}
	x.NextReason = fmt.Sprintf("the default balancer is random: it draws two of the %d targets that can take a call and sends to the cheaper (stalled or 2x slower loses, else fewer calls in flight); %s is the cheapest now and gets the call whenever it is drawn (%.0f%% of picks), the cheaper of another pair the rest", len(ok), best.t.p.addr, 200/float64(len(ok)))
}

// pickable reports whether a call's pick would accept p at last-resort
// level lr (see remoteCall.pick), without taking a breaker permit.
func pickable(p *peer, lr uint8) bool {
	if p.conn.Load() == nil || lr < 1 && p.suspect.Load() || lr < 2 && p.down.Load() {
		return false
	}
	return breakerState(p) != "open"
}

// breakerState is p's breaker's state as far as the node can read it.
func breakerState(p *peer) string {
	b := p.breaker.Load()
	if b == nil {
		return ""
	}
	if o, ok := b.b.(interface{ IsOpen() bool }); ok {
		if o.IsOpen() {
			return "open"
		}
		return "closed"
	}
	return ""
}

// refusal is the error a call of the route r (nil: nothing matched the
// message pattern) would fail with before being sent, or nil.
func (n *Node) refusal(r *route, pattern string) *Error {
	if n.closed.Load() {
		return errClosed()
	}
	if r == nil {
		_, err := n.notFound(pattern, &noOptions)
		return toError(err)
	}
	if r.local.Load() != nil {
		return nil
	}
	ps := r.peers.Load()
	if ps == nil || len(*ps) == 0 || n.remote == nil {
		_, err := n.notFound(r.pattern.String(), &noOptions)
		return toError(err)
	}
	connected, open := 0, 0
	for _, p := range *ps {
		if p.conn.Load() == nil {
			continue
		}
		connected++
		if breakerState(p) == "open" {
			open++
		}
	}
	switch {
	case connected == 0:
		return Errorf(CodeUnavailable, "wizard: no target of %s is connected: %s", quoteClipped(r.pattern.String(), maxEcho), listPeers(n.routeStates(r)))
	case open == connected:
		return Errorf(CodeUnavailable, "wizard: every connected target of %s has its breaker open", quoteClipped(r.pattern.String(), maxEcho))
	}
	return nil
}
