package runtime

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Explanation says how a node routes one message: the pattern that wins
// by Seneca's precedence, every other added pattern that matches it, in
// the order they would answer were the ones before them removed, each
// with the reason it lost, and the targets of the winner with what the
// node knows of them. [Node.Explain] makes one.
type Explanation struct {
	// Message is the routed pairs of the message explained.
	Message Pattern
	// Found: some added pattern matches the message.
	Found bool
	// Candidates are the added patterns that match the message: the
	// winner first (when Found), then the others in precedence order.
	Candidates []Candidate
	// Local: the winner has a handler on this node, which takes every
	// call (a node never sends a call it can serve itself).
	Local bool
	// Targets are the peers serving the winner, by address.
	Targets []TargetState
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

// Candidate is one added pattern that matches an explained message.
type Candidate struct {
	Pattern Pattern
	// Rank is the candidate's place in precedence order, 1 for the
	// winner; 0 for a pattern the walk never reaches for this message
	// while the patterns ranked remain (see [Rule] RuleUnreachable).
	Rank int
	// Rule is why it lost to the winner ("" for the winner); Key the key
	// at which it lost ("" when none).
	Rule Rule
	Key  string
	// Reason says it in a sentence.
	Reason string
}

// Rule names a precedence rule by which a candidate loses.
type Rule string

// The precedence rules (DESIGN §2, patrun's find).
const (
	// RuleExact: at a key the message's value has an exact pattern
	// value, which is tried before any glob.
	RuleExact Rule = "exact-before-glob"
	// RuleGlobOrder: two globs at the same key match; the one added first
	// is tried first.
	RuleGlobOrder Rule = "glob-order"
	// RuleKeyOrder: the loser lacks a key (the first in byte order where
	// the two differ) that the walk matched; the walk goes back to
	// patterns without it only while it has found nothing.
	RuleKeyOrder Rule = "first-key"
	// RuleDeeper: the winner extends the loser's path: deeper wins.
	RuleDeeper Rule = "deeper"
	// RuleKept: the walk went down a branch that holds no handler for the
	// message and kept the winner, found before; it never goes back once
	// it has a handler.
	RuleKept Rule = "kept-earlier"
)

// TargetState is what a node knows of one peer serving a pattern.
type TargetState struct {
	ID        string
	Addr      string
	Transport string
	Connected bool
	Suspect   bool
	// Down: discovery reported it gone; it is called only when no other
	// target can be, for a few seconds.
	Down bool
	// Breaker is "open", "closed" (permits calls; a half-open breaker
	// says closed), or "" when the node has no breaker for it.
	Breaker string
	// InFlight and Latency are as [Target.InFlight] and [Target.Latency].
	InFlight int
	Latency  time.Duration
	// Stalled: calls wait on it and it has answered none for a while;
	// the default balancer avoids it.
	Stalled bool
	// LastError is why the last dial failed, while it is not connected.
	LastError string
}

// Explain explains how the node routes a call whose routed pairs are
// pattern's (as [Node.ActE] with that pattern routes it, or [Node.Act]
// with a message of those root fields). It only reads: it takes no
// breaker permit and sends nothing. A malformed pattern is an error.
func (n *Node) Explain(pattern string) (Explanation, error) {
	p, err := ParsePattern(pattern)
	if err != nil {
		return Explanation{}, err
	}
	return n.explain(p.pairs()), nil
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
	return n.explain(mapPairs(nil, m)), nil
}

func (n *Node) explain(pairs []Pair) Explanation {
	x := Explanation{Message: newPattern(clonePairs(pairs))}
	x.Candidates = n.router.candidates(pairs)
	if len(x.Candidates) == 0 || x.Candidates[0].Rank != 1 {
		x.Refused = n.refusal(nil, x.Message.String())
		return x
	}
	x.Found = true
	re := n.router.exactEntry(x.Candidates[0].Pattern)
	if re == nil { // removed since
		x.Refused = n.refusal(nil, x.Message.String())
		return x
	}
	n.explainRoute(&x, re.value)
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

// Route is what a node knows of the route of one pattern in its routing
// ([Node.Patterns] lists them): the peers serving it with their state,
// and its message types. [Node.Route] returns it.
type Route struct {
	Pattern Pattern
	// Local: this node has a handler for it.
	Local bool
	// Targets is what the node knows of each peer serving it (those
	// reported down included), by address.
	Targets []TargetState
	// Request and Response are the protobuf full names of its messages:
	// its local handler's, else those all its peers list ("" when untyped
	// or when they differ).
	Request, Response string
}

// Route returns the route of exactly pattern (not the best match: see
// [Node.Explain]) and whether the node's routing has it.
func (n *Node) Route(pattern string) (Route, bool, error) {
	p, err := ParsePattern(pattern)
	if err != nil {
		return Route{}, false, err
	}
	re := n.router.exactEntry(p)
	if re == nil {
		return Route{}, false, nil
	}
	r := re.value
	out := Route{Pattern: p, Local: r.local.Load() != nil, Targets: n.targetStates(r)}
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
func (n *Node) targetStates(r *route) []TargetState {
	if n.remote == nil {
		return nil
	}
	peers := sortedPeers(r)
	if len(peers) == 0 {
		return nil
	}
	now := clock()
	own := n.remote.transport.Name()
	out := make([]TargetState, 0, len(peers))
	n.remote.mu.Lock()
	defer n.remote.mu.Unlock()
	for _, p := range peers {
		t := TargetState{ID: p.id, Addr: p.addr, Transport: own, Connected: p.conn.Load() != nil,
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

// A step of a walk through the router's tree: at a node with a level,
// the branch taken: a value, a glob, or the skip branch.
type walkChoice struct {
	kind  uint8 // choiceValue, choiceGlob, choiceSkip
	label string
}

const (
	choiceValue uint8 = iota
	choiceGlob
	choiceSkip
)

// candidates returns the patterns of r that match pairs (sorted), the
// winner first, then the others in precedence order, each with why it
// lost.
func (r *Router[V]) candidates(pairs []Pair) []Candidate {
	r.mu.RLock()
	entries := make([]*rentry[V], 0, len(r.all))
	var match []*rentry[V]
	for _, e := range r.all {
		entries = append(entries, e)
		if patternMatches(e.pattern, pairs) {
			match = append(match, e)
		}
	}
	var winner *rentry[V]
	var trace map[*rnode[V]]walkChoice
	if len(match) > 0 {
		winner, trace = r.tracedWalk(pairs)
	}
	paths := make(map[*rentry[V]][]pathStep[V], len(match))
	for _, e := range match {
		paths[e] = r.pathOf(e.pattern)
	}
	r.mu.RUnlock()
	if len(match) == 0 {
		return nil
	}
	// The order: who answers once those before are removed, from a
	// copy of the router with the same patterns in the same add order.
	slices.SortFunc(entries, func(a, b *rentry[V]) int { return int(a.seq) - int(b.seq) })
	scratch := NewRouter[uint64]()
	bySeq := make(map[uint64]*rentry[V], len(entries))
	for _, e := range entries {
		_ = scratch.Add(e.pattern, e.seq)
		bySeq[e.seq] = e
	}
	ranked := map[*rentry[V]]int{}
	var out []Candidate
	for {
		re := scratch.walkLocked(pairs)
		if re == nil {
			break
		}
		e := bySeq[re.value]
		ranked[e] = len(out) + 1
		out = append(out, Candidate{Pattern: e.pattern, Rank: len(out) + 1})
		scratch.Remove(e.pattern)
	}
	slices.SortFunc(match, func(a, b *rentry[V]) int { return int(a.seq) - int(b.seq) })
	for _, e := range match {
		if ranked[e] == 0 {
			out = append(out, Candidate{Pattern: e.pattern})
		}
	}
	if winner == nil || len(out) == 0 || !out[0].Pattern.Equal(winner.pattern) {
		return out // changed while explained: no reasons
	}
	wp := paths[winner]
	for i := range out {
		if i == 0 {
			continue
		}
		var e *rentry[V]
		for _, m := range match {
			if m.pattern.Equal(out[i].Pattern) {
				e = m
			}
		}
		out[i].Rule, out[i].Key, out[i].Reason = lossReason(paths[e], wp, trace, out[i].Pattern, winner.pattern)
		if out[i].Rank == 0 {
			out[i].Reason += "; the walk never reaches it for this message, even with the patterns above it removed: it goes back only to branches that skip a key, never to another value or glob of a key it matched"
		}
	}
	return out
}

// walkLocked is find without the exact-match shortcut, taking r.mu.
func (r *Router[V]) walkLocked(pairs []Pair) *rentry[V] {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.walk(pairs, false)
}

// patternMatches reports whether every pair of p matches pairs (sorted):
// the key is there with the value, or a value the glob matches.
func patternMatches(p Pattern, pairs []Pair) bool {
	for _, pr := range p.pairs() {
		v, ok := lookupPair(pairs, pr.Key)
		if !ok || v != pr.Value && !(isGlob(pr.Value) && globMatch(pr.Value, v)) {
			return false
		}
	}
	return true
}

// pathStep is one step of a pattern's path through the tree: at node, the
// choice that leads on.
type pathStep[V any] struct {
	node   *rnode[V]
	choice walkChoice
	key    string
}

// pathOf is p's path from the root to the node where its entry sits, as
// Add made it. Callers hold r.mu.
func (r *Router[V]) pathOf(p Pattern) []pathStep[V] {
	var out []pathStep[V]
	n := &r.root
	pairs := p.pairs()
	for i := 0; i < len(pairs) && n != nil; {
		pr := pairs[i]
		if n.key == pr.Key {
			kind := choiceValue
			var next *rnode[V]
			if isGlob(pr.Value) {
				kind = choiceGlob
				for _, g := range n.globs {
					if g.glob == pr.Value {
						next = g.node
					}
				}
			} else {
				next = n.vals[pr.Value]
			}
			out = append(out, pathStep[V]{n, walkChoice{kind, pr.Value}, n.key})
			n = next
			i++
			continue
		}
		out = append(out, pathStep[V]{n, walkChoice{choiceSkip, ""}, n.key})
		n = n.skip
	}
	return out
}

// tracedWalk is walk (not exact) recording the choice made at every node
// it passes. Callers hold r.mu.
func (r *Router[V]) tracedWalk(pairs []Pair) (*rentry[V], map[*rnode[V]]walkChoice) {
	trace := map[*rnode[V]]walkChoice{}
	var stars []*rnode[V]
	n := &r.root
	data := r.root.entry
	for n != nil {
		var next *rnode[V]
		if n.key != "" {
			c := walkChoice{kind: choiceSkip}
			if val, ok := lookupPair(pairs, n.key); ok {
				if next = n.vals[val]; next != nil {
					c = walkChoice{choiceValue, val}
				} else {
					for _, g := range n.globs {
						if globMatch(g.glob, val) {
							next, c = g.node, walkChoice{choiceGlob, g.glob}
							break
						}
					}
				}
			}
			trace[n] = c
			if next != nil {
				if n.skip != nil {
					stars = append(stars, n.skip)
				}
				if next.entry != nil {
					data = next.entry
				}
				n = next
			} else {
				n = n.skip
			}
		} else {
			n = nil
		}
		if n == nil && data == nil && len(stars) > 0 {
			n = stars[len(stars)-1]
			stars = stars[:len(stars)-1]
		}
	}
	return data, trace
}

// extraPairs is what won has beyond lost when it holds every pair of
// lost, and whether it does.
func extraPairs(lost, won Pattern) (string, bool) {
	var extra []string
	for _, pr := range lost.pairs() {
		if v, ok := won.Get(pr.Key); !ok || v != pr.Value {
			return "", false
		}
	}
	for _, pr := range won.pairs() {
		if _, ok := lost.Get(pr.Key); !ok {
			extra = append(extra, pr.Key+":"+pr.Value)
		}
	}
	return strings.Join(extra, ","), len(extra) > 0
}

// lossReason says why the pattern lost, whose path is lp, to the winner,
// whose path is wp, on the walk trace.
func lossReason[V any](lp, wp []pathStep[V], trace map[*rnode[V]]walkChoice, lost, won Pattern) (Rule, string, string) {
	winnerAt := func(n *rnode[V]) bool { // the walk passed the winner's entry before n
		for _, s := range wp {
			if s.node == n {
				return false
			}
		}
		return true
	}
	if extra, ok := extraPairs(lost, won); ok {
		return RuleDeeper, "", fmt.Sprintf("deeper wins: %s matches all of it and also %s", quoteClipped(won.String(), maxEcho), extra)
	}
	for i := 0; i < len(lp); i++ {
		s := lp[i]
		w, seen := trace[s.node]
		if !seen {
			break
		}
		if w == s.choice {
			continue
		}
		k := s.key
		switch {
		case w.kind == choiceValue && s.choice.kind == choiceGlob:
			return RuleExact, k, fmt.Sprintf("exact before glob: at key %s the message's value %s is a pattern value, tried before the glob %s", k, w.label, s.choice.label)
		case w.kind == choiceGlob && s.choice.kind == choiceGlob:
			return RuleGlobOrder, k, fmt.Sprintf("glob order: at key %s the glob %s, added first, is tried before %s", k, w.label, s.choice.label)
		case s.choice.kind == choiceSkip && w.kind != choiceSkip:
			if i+1 < len(lp) {
				if _, back := trace[lp[i+1].node]; back {
					continue // the walk came back to the skip branch
				}
			}
			if winnerAt(s.node) {
				return RuleKept, k, fmt.Sprintf("kept earlier: the walk took %s:%s (a longer pattern with key %s), found no handler there and kept %s, found before; it never goes back once it has a handler", k, w.label, k, quoteClipped(won.String(), maxEcho))
			}
			return RuleKeyOrder, k, fmt.Sprintf("first key in byte order: %s has no key %s, which the walk matched (%s:%s) first; it goes back to patterns without %s only while it has found nothing", quoteClipped(lost.String(), maxEcho), k, k, w.label, k)
		}
		break
	}
	return "", "", "loses by the walk's order"
}
