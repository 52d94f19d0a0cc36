package runtime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/wizardmesh/wizard/runtime/internal/patrun"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// Events: a subscription is a handler added for a pattern in a group
// ([Node.Subscribe]); [Node.Emit] hands an event to one member of every
// group with a matching subscription, [Node.Broadcast] to every member.
// Subscriptions travel in the catalogs as patterns with the reserved pair
// groupKey:group, which no message carries, so that nodes that know
// nothing of events route nothing to them; a delivery is a call that
// carries the group in its metadata (metaEvent, metaBroadcast) and the
// event's own pairs as its pattern.

const (
	// groupKey is the pair a subscription's pattern carries in catalogs:
	// its group. Subscribe refuses patterns with the key.
	groupKey = "wizard.group"
	// metaEvent carries an emitted event's group; metaBroadcast marks a
	// broadcast event, which every matching subscription of the node
	// receives.
	metaEvent     = ":e"
	metaBroadcast = ":b"
	// maxGroup bounds a group's name.
	maxGroup = 128
)

// Delivery is what [Node.Emit] or [Node.Broadcast] learnt of an event.
// For Emit, Took and Missed name groups; for Broadcast, node ids (this
// node's own for its local subscriptions). With [NoReply], Took names
// those the event was handed to, not those that ran it.
type Delivery struct {
	// Took lists those that handled the event without error.
	Took []string
	// Missed lists those with a matching subscription that did not: every
	// member refused or could not be reached, the event was lost after it
	// was sent (it may have run), or the handler failed. The error Emit
	// returns says why for each.
	Missed []string
}

// WithService names the node's service: the group its subscriptions join
// when [Node.Subscribe] names none, so that the replicas of one service
// share each event and other services get their own copy. Without it the
// service is the program's name (the base name of its executable).
func WithService(name string) Option {
	return nodeOption(func(c *nodeConfig) { c.service = name })
}

// defaultService is the program's name: the service of nodes without
// [WithService].
var defaultService = sync.OnceValue(func() string {
	name := filepath.Base(os.Args[0])
	name = strings.TrimSuffix(name, ".exe")
	if name == "" || name == "." || name == string(filepath.Separator) {
		return "wizard"
	}
	return name
})

// Service returns the node's service name ([WithService]).
func (n *Node) Service() string { return n.service }

// checkGroup reports what is wrong with a group's name, or nil.
func checkGroup(g string) error {
	switch {
	case g == "":
		return errors.New("the group is empty")
	case len(g) > maxGroup:
		return fmt.Errorf("the group is %d bytes, more than %d", len(g), maxGroup)
	case !utf8.ValidString(g):
		return errors.New("the group is not UTF-8")
	case strings.IndexFunc(g, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) >= 0:
		return fmt.Errorf("the group %q holds a space or a control character", g)
	}
	return nil
}

// Subscribe adds h as a subscriber of the events that match pattern, in
// group ("" for the node's service, [WithService]). Every subscription
// whose pattern matches an event receives it, as Seneca's sub does: not
// only the best match, as a call's handler is chosen. An event emitted
// ([Node.Emit]) reaches one member of each group; a broadcast one
// ([Node.Broadcast]) every member. h's answer is dropped; its error is
// reported to the emitter. Subscribing a pattern twice in a group is an
// error unless opts include [Override]; [Method] gives the subscription
// its message types, as it does a handler's.
func (n *Node) Subscribe(pattern, group string, h Handler, opts ...HandlerOption) error {
	p, err := patrun.Parse(pattern)
	if err != nil {
		return err
	}
	group = cmp.Or(group, n.service)
	if err := checkGroup(group); err != nil {
		return Errorf(CodeInvalidArgument, "wizard: Subscribe(%q, %q): %v", p.String(), group, err)
	}
	if h == nil {
		return Errorf(CodeInvalidArgument, "wizard: Subscribe(%q, %q): nil handler", p.String(), group)
	}
	if isStreamHandler(h) {
		return Errorf(CodeInvalidArgument, "wizard: Subscribe(%q, %q): a stream handler cannot take events; subscribe a handler made by NewUnaryHandler or a Handler function", p.String(), group)
	}
	if _, ok := p.Get(groupKey); ok {
		return Errorf(CodeInvalidArgument, "wizard: Subscribe(%q, %q): the key %s is reserved for subscriptions' groups", p.String(), group, groupKey)
	}
	if v, ok := p.Get("sys"); ok && v == "wizard" {
		return Errorf(CodeInvalidArgument, "wizard: Subscribe(%q, %q): sys:wizard patterns are the node's own", p.String(), group)
	}
	if n.closed.Load() {
		return errClosed()
	}
	var c handlerConfig
	for _, o := range opts {
		if o != nil {
			o.applyHandler(&c)
		}
	}
	for i := len(n.handlerICs) - 1; i >= 0; i-- {
		h = n.handlerICs[i](h)
	}
	wirePat := subscriptionPattern(p, group)
	if n.Addr() != "" && n.limits.over(wirePat) {
		return Errorf(CodeInvalidArgument, "wizard: Subscribe(%q, %q): the pattern with its group is over the limits of patterns from other nodes (WithMaxPatternSize)", p.String(), group)
	}
	e := &handlerEntry{pattern: p, h: h, group: group, wire: wirePat, spec: c.spec, types: c.spec.types()}
	n.routeMu.Lock()
	defer n.routeMu.Unlock()
	subs := slices.Clone(n.localSubscriptions())
	i := slices.IndexFunc(subs, func(s *handlerEntry) bool { return s.group == group && s.pattern.Equal(p) })
	switch {
	case i >= 0 && !c.override:
		return Errorf(CodeAlreadyExists, "wizard: %q is already subscribed in group %q; use runtime.Override() to replace it", p.String(), group)
	case i >= 0:
		e.prior = subs[i]
		subs[i] = e
	default:
		subs = append(subs, e)
	}
	n.setLocalSubs(subs)
	n.routingChanged()
	n.localChanged()
	return nil
}

// Unsubscribe removes the subscription of pattern in group ("" for the
// node's service) and reports whether there was one.
func (n *Node) Unsubscribe(pattern, group string) (bool, error) {
	p, err := patrun.Parse(pattern)
	if err != nil {
		return false, err
	}
	group = cmp.Or(group, n.service)
	n.routeMu.Lock()
	defer n.routeMu.Unlock()
	cur := n.localSubscriptions()
	i := slices.IndexFunc(cur, func(s *handlerEntry) bool { return s.group == group && s.pattern.Equal(p) })
	if i < 0 {
		return false, nil
	}
	subs := slices.Delete(slices.Clone(cur), i, i+1)
	n.setLocalSubs(subs)
	n.routingChanged()
	n.localChanged()
	return true, nil
}

// subscriptionPattern is the pattern a subscription of p in group has in
// catalogs: p with the pair groupKey:group.
func subscriptionPattern(p pattern.Pattern, group string) pattern.Pattern {
	pairs := append(clonePairs(patrun.PairsOf(p)), pattern.Pair{Key: groupKey, Value: group})
	patrun.SortPairs(pairs)
	return patrun.New(pairs)
}

// splitSubscription returns the pattern and group of a subscription's
// catalog pattern, and false for a handler's pattern.
func splitSubscription(p pattern.Pattern) (pattern.Pattern, string, bool) {
	g, ok := p.Get(groupKey)
	if !ok {
		return p, "", false
	}
	pairs := slices.DeleteFunc(clonePairs(patrun.PairsOf(p)), func(pr pattern.Pair) bool { return pr.Key == groupKey })
	return patrun.New(pairs), g, true
}

// eventSet is a node's subscriptions and its peers'.
type eventSet struct {
	// local is this node's subscriptions, in the order they were made,
	// indexed for events; replaced under the node's routeMu.
	local atomic.Pointer[subIndex[*handlerEntry]]
	// routes are the peers' subscriptions, one route by catalog pattern
	// (a pattern and a group), guarded by routeMu; list is a snapshot of
	// them for emitters, indexed, replaced on every change.
	routes map[string]*subRoute
	list   atomic.Pointer[subIndex[*subRoute]]
}

// setLocalSubs publishes subs as this node's subscriptions, with their
// index. Callers hold routeMu.
func (n *Node) setLocalSubs(subs []*handlerEntry) {
	n.events.local.Store(newSubIndex(subs, func(s *handlerEntry) pattern.Pattern { return s.pattern }))
}

// subRoute is a subscription some peers hold: its pattern and group,
// and the route through which deliveries to it go (its pattern the
// catalog's; its peers the peers that hold it).
type subRoute struct {
	pattern pattern.Pattern
	group   string
	r       *route
}

// localSubscriptions returns this node's subscriptions.
func (n *Node) localSubscriptions() []*handlerEntry {
	return n.events.local.Load().all()
}

// addPeerSub adds p as a holder of the subscription whose catalog pattern
// is pt. Callers hold routeMu.
func (n *Node) addPeerSub(pt pattern.Pattern, p *peer) {
	k := pt.String()
	sr := n.events.routes[k]
	if sr == nil {
		sp, g, _ := splitSubscription(pt)
		sr = &subRoute{pattern: sp, group: g, r: &route{pattern: pt}}
		if n.events.routes == nil {
			n.events.routes = map[string]*subRoute{}
		}
		n.events.routes[k] = sr
		defer n.publishSubs()
	}
	n.joinRoute(sr.r, p)
}

// removePeerSub removes p as a holder of the subscription whose catalog
// pattern is pt. Callers hold routeMu.
func (n *Node) removePeerSub(pt pattern.Pattern, p *peer) {
	k := pt.String()
	sr := n.events.routes[k]
	if sr == nil {
		return
	}
	r := sr.r
	if cur := r.peers.Load(); cur != nil {
		peers := slices.DeleteFunc(slices.Clone(*cur), func(q *peer) bool { return q == p })
		n.balancerOf(r).Remove(&p.target)
		r.peers.Store(&peers)
		r.retype()
		if len(peers) == 0 {
			delete(n.events.routes, k)
			n.publishSubs()
		}
	}
}

// retypeSub updates the types of the subscription route of catalog
// pattern k, if there is one. Callers hold routeMu.
func (n *Node) retypeSub(k string) {
	if sr := n.events.routes[k]; sr != nil {
		sr.r.retype()
	}
}

// publishSubs replaces the emitters' snapshot of the peers'
// subscriptions. Callers hold routeMu.
func (n *Node) publishSubs() {
	list := make([]*subRoute, 0, len(n.events.routes))
	for _, sr := range n.events.routes {
		list = append(list, sr)
	}
	slices.SortFunc(list, func(a, b *subRoute) int { return strings.Compare(a.r.pattern.String(), b.r.pattern.String()) })
	n.events.list.Store(newSubIndex(list, func(sr *subRoute) pattern.Pattern { return sr.pattern }))
}

// remoteSubscriptions returns the peers' subscriptions.
func (n *Node) remoteSubscriptions() []*subRoute {
	return n.events.list.Load().all()
}

// Emit hands an event to one member of every group that has a
// subscription matching it (msg overlaid with the pattern's pairs, as
// [Node.Act] matches), and reports which groups took it. A group's
// member is chosen as a call's target is: this node when it is a member,
// else by the balancer among the peers whose breakers allow it; a member
// that refuses the event or cannot be reached is passed over for
// another. An event is never sent twice to a group: once it has been
// sent and its answer is lost, the group is missed (it may have run).
// With [NoReply] Emit returns once the event is handed over.
//
// The error is nil when every group with a matching subscription took
// the event; a [CodeNotFound] error whose cause is [ErrNoHandler] when no
// subscription matches; else the code of the first group missed, naming
// each missed group and why.
func (n *Node) Emit(ctx context.Context, pattern string, msg any, opts ...CallOption) (Delivery, error) {
	return n.emit(ctx, pattern, msg, opts, false)
}

// Broadcast hands an event to every node with a subscription matching
// it, this one included, each of which runs all its matching
// subscriptions, whatever their groups; it reports which nodes took it.
// Delivery and errors are as [Node.Emit]'s, by node instead of by group.
func (n *Node) Broadcast(ctx context.Context, pattern string, msg any, opts ...CallOption) (Delivery, error) {
	return n.emit(ctx, pattern, msg, opts, true)
}

// delivery is one destination of an event: a group (Emit) or a node
// (Broadcast); its local subscriptions, or else the route to its
// members.
type delivery struct {
	name  string
	local []*handlerEntry
	r     *route
	keys  []string // the keys of the remote subscriptions it is for
	err   error
	kbuf  [6]string  // keys' first room
	cfg   callConfig // its call's configuration (see emitCall.deliver)
}

// addKeys adds the keys of p's pairs to d's.
func (d *delivery) addKeys(p pattern.Pattern) {
	if d.keys == nil {
		d.keys = d.kbuf[:0]
	}
	for _, pr := range patrun.PairsOf(p) {
		if !slices.Contains(d.keys, pr.Key) {
			d.keys = append(d.keys, pr.Key)
		}
	}
}

// eventPattern is the pattern a remote delivery carries: the event's pairs
// whose keys its subscriptions test, in canonical form. What else the
// message holds (a long text field, say) is in its payload; as a pattern
// it would only meet the limits receivers put on patterns.
func eventPattern(pairs []pattern.Pair, keys []string) string {
	var buf [16]pattern.Pair
	kept := buf[:0]
	for _, pr := range pairs {
		if slices.Contains(keys, pr.Key) {
			kept = append(kept, pr)
		}
	}
	return string(patrun.AppendCanonical(nil, kept))
}

// emitCall is the state of one Emit or Broadcast, pooled: its
// configuration, the event's pairs and the first deliveries' room, so
// that an event to a few groups allocates none of it. Nothing keeps a
// reference into it once emit has returned: the deliveries' results are
// copied out (deliveryOf), and what a delivery hands on (its pattern, the
// local deliveries' pairs) is made of its own.
type emitCall struct {
	n         *Node
	cfg       callConfig
	ctx, rctx context.Context // the caller's; the remote deliveries'
	whole     pattern.Pattern // the event's pairs: local deliveries' pattern
	pairs     []pattern.Pair
	body      any
	over      *cachedPattern
	broadcast bool

	pbuf [16]pattern.Pair
	ds   []*delivery
	dbuf [4]*delivery
	dmem [4]delivery
}

var emitCalls = sync.Pool{New: func() any { return new(emitCall) }}

// newDelivery returns a delivery named name, from e's room while it lasts.
func (e *emitCall) newDelivery(name string) *delivery {
	var d *delivery
	if i := len(e.ds); i < len(e.dmem) {
		d = &e.dmem[i]
		*d = delivery{name: name}
	} else {
		d = &delivery{name: name}
	}
	e.ds = append(e.ds, d)
	return d
}

// release returns e to the pool, holding nothing of the event.
func (e *emitCall) release() {
	*e = emitCall{}
	emitCalls.Put(e)
}

func (n *Node) emit(ctx context.Context, pat string, msg any, opts []CallOption, broadcast bool) (Delivery, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	t, err := n.parsed.get(pat)
	if err != nil {
		return Delivery{}, err
	}
	if n.closed.Load() {
		return Delivery{}, errClosed()
	}
	e := emitCalls.Get().(*emitCall)
	defer e.release()
	e.n, e.cfg, e.ctx, e.broadcast = n, *configOf(opts), ctx, broadcast
	e.pairs, e.body, e.over, err = actMessage(e.pbuf[:0], t, msg)
	if err != nil {
		return Delivery{}, err
	}
	pairs := e.pairs
	if e.cfg.waitForReady {
		if err := n.waitForSubscribers(ctx, pairs); err != nil {
			return Delivery{}, err
		}
	}
	e.ds = e.dbuf[:0]
	if broadcast {
		n.broadcastTargets(e, pairs)
	} else {
		n.emitTargets(e, pairs)
	}
	ds := e.ds
	if len(ds) == 0 {
		canonical := string(patrun.AppendCanonical(nil, pairs))
		return Delivery{}, &Error{Code: CodeNotFound, Message: "wizard: no subscription matches " + quoteClipped(canonical, maxEcho), cause: ErrNoHandler}
	}
	e.rctx = ctx
	if n.remote != nil && slices.ContainsFunc(ds, func(d *delivery) bool { return d.local == nil }) {
		// One deadline for every remote delivery, made once: each
		// delivery's call then finds it set (callContext).
		var cancel context.CancelFunc
		e.rctx, cancel = n.remote.callContext(ctx, &e.cfg)
		defer cancel()
	}
	if slices.ContainsFunc(ds, func(d *delivery) bool { return d.local != nil }) {
		e.whole = patrun.New(clonePairs(pairs))
	}
	// Remote deliveries go in parallel; local ones run in turn, in the
	// order the subscriptions were made, while the remote ones travel.
	var wg sync.WaitGroup
	var first *delivery
	for _, d := range ds {
		switch {
		case d.local != nil:
		case first == nil:
			first = d
		default:
			wg.Go(func() { e.deliver(d) })
		}
	}
	for _, d := range ds {
		if d.local != nil {
			e.deliver(d)
		}
	}
	if first != nil {
		e.deliver(first)
	}
	wg.Wait()
	return deliveryOf(pairs, ds, broadcast)
}

// deliver delivers e's event to d, setting d.err.
func (e *emitCall) deliver(d *delivery) {
	n := e.n
	dc := &d.cfg
	*dc = e.cfg
	dc.waitForReady = false // waited for in emit
	dctx := e.ctx
	if d.local != nil {
		dc.eventLocal, dc.eventP = d.local, e.whole
	} else {
		dctx = e.rctx
		dc.eventRoute = d.r
		dc.eventPat = eventPattern(e.pairs, d.keys)
		if e.broadcast {
			dc.broadcast = true
		} else {
			dc.event = d.name
		}
		if n.obs.o != nil || n.invoker != nil {
			dc.eventP, _ = patrun.Parse(dc.eventPat)
		}
	}
	if n.invoker == nil {
		d.err = n.deliverEvent(dctx, dc, e.body, e.over)
		return
	}
	// Through the call interceptors, once a delivery: the Call and its
	// configuration are the interceptors', not the pool's.
	b := &interceptedCall{own: *dc}
	b.call = Call{Pattern: b.own.eventP, Msg: e.body, NoReply: b.own.noReply, Event: true, cfg: &b.own, over: e.over}
	if !e.broadcast {
		b.call.Group = d.name
	}
	_, d.err = n.invoker(dctx, &b.call)
}

// deliveryOf sums the deliveries of an event up.
func deliveryOf(pairs []pattern.Pair, ds []*delivery, broadcast bool) (Delivery, error) {
	out := Delivery{Took: make([]string, 0, len(ds))}
	var first *Error
	var why []string
	var errs []error
	for _, d := range ds {
		if d.err == nil {
			out.Took = append(out.Took, d.name)
			continue
		}
		out.Missed = append(out.Missed, d.name)
		e := toError(d.err)
		if first == nil {
			first = e
		}
		why = append(why, fmt.Sprintf("%s (%s: %s)", d.name, e.Code, e.Message))
		errs = append(errs, d.err)
	}
	if first == nil {
		return out, nil
	}
	canonical := string(patrun.AppendCanonical(nil, pairs))
	what := "groups"
	if broadcast {
		what = "nodes"
	}
	return out, &Error{
		Code:    first.Code,
		Message: fmt.Sprintf("wizard: event %s: %d of %d %s missed it: %s", quoteClipped(canonical, maxEcho), len(out.Missed), len(ds), what, strings.Join(why, "; ")),
		cause:   errors.Join(errs...),
	}
}

// emitTargets adds to e a delivery for each group with a subscription that
// matches pairs: local when this node has one, else the route of the
// peers that do (a route of their union when several of the group's
// subscriptions match).
func (n *Node) emitTargets(e *emitCall, pairs []pattern.Pair) {
	byGroup := func(g string) *delivery {
		for _, d := range e.ds {
			if d.name == g {
				return d
			}
		}
		return e.newDelivery(g)
	}
	var buf [16]int
	lx := n.events.local.Load()
	for _, i := range lx.match(pairs, buf[:0]) {
		s := lx.subs[i]
		d := byGroup(s.group)
		d.local = append(d.local, s)
	}
	var union map[*delivery][]*peer
	rx := n.events.list.Load()
	for _, i := range rx.match(pairs, buf[:0]) {
		sr := rx.subs[i]
		if !sr.r.hasPeers() {
			continue
		}
		d := byGroup(sr.group)
		if d.local == nil {
			d.addKeys(sr.pattern)
		}
		switch {
		case d.local != nil:
		case d.r == nil:
			d.r = sr.r
		default:
			// Another of the group's subscriptions matches too: its
			// members are the peers of either.
			if union == nil {
				union = map[*delivery][]*peer{}
			}
			if _, ok := union[d]; !ok {
				union[d] = slices.Clone(*d.r.peers.Load())
			}
			for _, p := range *sr.r.peers.Load() {
				if !slices.Contains(union[d], p) {
					union[d] = append(union[d], p)
				}
			}
		}
	}
	for d, peers := range union {
		d.r = n.peersRoute(d.r.pattern, peers)
	}
}

// subscribedGroups returns the groups with a subscription that matches
// pairs, this node's or a peer's: emitTargets' groups, without the routes
// it makes to deliver.
func (n *Node) subscribedGroups(pairs []pattern.Pair) []string {
	var gs []string
	var buf [16]int
	lx := n.events.local.Load()
	for _, i := range lx.match(pairs, buf[:0]) {
		if s := lx.subs[i]; !slices.Contains(gs, s.group) {
			gs = append(gs, s.group)
		}
	}
	rx := n.events.list.Load()
	for _, i := range rx.match(pairs, buf[:0]) {
		if sr := rx.subs[i]; sr.r.hasPeers() && !slices.Contains(gs, sr.group) {
			gs = append(gs, sr.group)
		}
	}
	return gs
}

// broadcastTargets adds to e a delivery for this node when it has a
// subscription that matches pairs, and one for each peer that has.
func (n *Node) broadcastTargets(e *emitCall, pairs []pattern.Pair) {
	var local []*handlerEntry
	var buf [16]int
	lx := n.events.local.Load()
	for _, i := range lx.match(pairs, buf[:0]) {
		local = append(local, lx.subs[i])
	}
	if local != nil {
		e.newDelivery(n.id).local = local
	}
	var byPeer map[*peer]*delivery
	rx := n.events.list.Load()
	for _, i := range rx.match(pairs, buf[:0]) {
		sr := rx.subs[i]
		ps := sr.r.peers.Load()
		if ps == nil {
			continue
		}
		for _, p := range *ps {
			d, ok := byPeer[p]
			if !ok {
				if byPeer == nil {
					byPeer = map[*peer]*delivery{}
				}
				d = e.newDelivery(n.peerName(p))
				d.r = n.peersRoute(sr.r.pattern, []*peer{p})
				byPeer[p] = d
			}
			d.addKeys(sr.pattern)
		}
	}
}

// peerName is p's node id, or its address before its catalog came.
func (n *Node) peerName(p *peer) string {
	n.remote.mu.Lock()
	defer n.remote.mu.Unlock()
	return cmp.Or(p.id, p.addr)
}

// peersRoute is a route of its own to peers, for one event: its pattern
// pt, its balancer the node's.
func (n *Node) peersRoute(pt pattern.Pattern, peers []*peer) *route {
	r := &route{pattern: pt}
	b := n.balancerOf(r)
	for _, p := range peers {
		b.Add(&p.target, 1)
	}
	r.peers.Store(&peers)
	return r
}

// deliverEvent delivers an event as cfg says: to this node's
// subscriptions cfg.eventLocal, or through cfg.eventRoute.
func (n *Node) deliverEvent(ctx context.Context, cfg *callConfig, body any, over *cachedPattern) error {
	if cfg.eventLocal == nil {
		_, err := n.callRemote(ctx, &callArgs{cfg.eventRoute, patrun.PairsOf(cfg.eventP), body, over, cfg})
		return err
	}
	if metadataUsed.Load() {
		hctx, err := inProcessContext(ctx)
		if err != nil {
			return err
		}
		ctx = hctx
	}
	_, err := n.dispatch(ctx, n.eventEntry(cfg.eventP, cfg.eventLocal), body, over, cfg)
	return err
}

// eventEntry is a handler that runs the subscriptions subs on an event
// of pattern p, one after the other, each with its own Request (its
// pattern, its group); it fails with the first error.
func (n *Node) eventEntry(p pattern.Pattern, subs []*handlerEntry) *handlerEntry {
	return &handlerEntry{pattern: p, h: func(ctx context.Context, req Request) (any, error) {
		var first error
		for _, s := range subs {
			if _, err := n.serve(ctx, s, Request{msg: req.msg, over: req.over, entry: s, node: n}); err != nil && first == nil {
				first = err
			}
		}
		return nil, first
	}}
}

// servedEvent returns the handler of an event delivered by another node
// (m carries metaEvent or metaBroadcast), or false for a call. A node
// with no matching subscription in the group refuses it.
func (n *Node) servedEvent(m *Message) (*handlerEntry, bool, error) {
	group, broadcast, ok := eventMeta(m.Meta)
	if !ok {
		return nil, false, nil
	}
	// Cached as a call's pattern is: it holds only the keys the
	// node's subscriptions test (eventPattern), a few patterns.
	t, err := n.wireTarget(m.Pattern)
	if err != nil {
		return nil, true, err
	}
	var subs []*handlerEntry
	var buf [16]int
	lx := n.events.local.Load()
	for _, i := range lx.match(patrun.PairsOf(t.pattern), buf[:0]) {
		if s := lx.subs[i]; broadcast || s.group == group {
			subs = append(subs, s)
		}
	}
	if subs == nil {
		return nil, true, nil
	}
	return n.eventEntry(t.pattern, subs), true, nil
}

// eventMeta returns the group of an event delivery's metadata, or that it
// is a broadcast; ok is false for a call.
func eventMeta(meta []MetaPair) (group string, broadcast, ok bool) {
	for _, p := range meta {
		switch p.Key {
		case metaEvent:
			return p.Value, false, true
		case metaBroadcast:
			return "", true, true
		}
	}
	return "", false, false
}

// WaitForSubscribers blocks until an event of pattern would reach a
// subscription of each group named (of any group when none is), or
// until ctx is done.
func (n *Node) WaitForSubscribers(ctx context.Context, pattern string, groups ...string) error {
	t, err := n.parsed.get(pattern)
	if err != nil {
		return err
	}
	return n.waitForSubscribers(ctx, patrun.PairsOf(t.pattern), groups...)
}

func (n *Node) waitForSubscribers(ctx context.Context, pairs []pattern.Pair, groups ...string) error {
	for {
		n.routeMu.Lock()
		ch := n.changed
		n.routeMu.Unlock()
		have := n.subscribedGroups(pairs)
		missing := slices.DeleteFunc(slices.Clone(groups), func(g string) bool { return slices.Contains(have, g) })
		if len(have) > 0 && len(missing) == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			err := ctx.Err()
			canonical := string(patrun.AppendCanonical(nil, pairs))
			what := "no subscription matches it"
			if len(have) > 0 {
				what = "no subscription of " + strings.Join(missing, ", ") + " matches it"
			}
			return &Error{Code: CodeOf(err), Message: fmt.Sprintf("wizard: waiting for subscribers of %s: %v; %s", quoteClipped(canonical, maxEcho), err, what), cause: err}
		}
	}
}

// Group returns the group of the subscription an event was delivered to
// ([Node.Subscribe]), or "" for a call.
func (r Request) Group() string {
	if r.entry == nil {
		return ""
	}
	return r.entry.group
}
