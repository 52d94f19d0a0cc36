package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wizardmesh/wizard/gateway/config"
	"github.com/wizardmesh/wizard/gateway/internal/jsonscan"
	"github.com/wizardmesh/wizard/runtime"
)

// Event push: WebSocket clients subscribe (sub frames) to event patterns
// a route allows, filled from their verified identity; the gateway's
// node subscribes to each distinct pattern once, in a group of its own
// (its node id), and fans each event out to the sockets that asked for
// it as event frames.
//
// The group is the instance's own because an emit reaches one member of
// each group: were the gateway instances one group (their service), an
// event would reach one instance, and a user whose socket is on another
// would miss it. A group per instance makes every instance with a
// socket that wants the event receive it.

// eventRoute is a route's events as the gateway checks sub frames
// against them: the route's policy (auth, scopes) and its templates.
type eventRoute struct {
	policy    *policy
	templates []*config.EventTemplate
}

// eventRoutesOf returns the routes of t that allow events.
func eventRoutesOf(ct *configTable) []eventRoute {
	var out []eventRoute
	for _, r := range ct.t.Routes() {
		if ts := r.EventTemplates(); len(ts) > 0 {
			out = append(out, eventRoute{policy: ct.policies[r], templates: ts})
		}
	}
	return out
}

// eventClaims returns the claims the routes' templates read: what a
// connection keeps of its identity's claims.
func eventClaims(routes []eventRoute) []string {
	var out []string
	for _, r := range routes {
		for _, t := range r.templates {
			for _, c := range t.Claims() {
				if !slices.Contains(out, c) {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// EventStats are the gateway's counters of event push since it started.
type EventStats struct {
	// Subscriptions is the number of WebSocket subscriptions open now.
	Subscriptions int64
	// MeshSubscriptions is the number of the node's subscriptions open
	// now: one per distinct pattern the sockets subscribe to.
	MeshSubscriptions int64
	// Events counts the events the node received for its sockets.
	Events uint64
	// Delivered counts the event frames queued to sockets.
	Delivered uint64
	// Dropped counts the event frames dropped from full event queues
	// (websocket.event_overflow: drop_oldest).
	Dropped uint64
	// Closed counts the connections closed for a full event queue
	// (event_overflow: close).
	Closed uint64
	// Undecodable counts the events whose message could not be written
	// as JSON (a protobuf type the gateway does not know), sent to no
	// socket.
	Undecodable uint64
}

// EventStats returns the gateway's event counters.
func (g *Gateway) EventStats() EventStats {
	h := g.events
	h.mu.Lock()
	mesh := int64(len(h.subs))
	h.mu.Unlock()
	return EventStats{
		Subscriptions:     h.open.Load(),
		MeshSubscriptions: mesh,
		Events:            h.events.Load(),
		Delivered:         h.delivered.Load(),
		Dropped:           h.dropped.Load(),
		Closed:            h.closed.Load(),
		Undecodable:       h.undecodable.Load(),
	}
}

// eventHub holds the node's subscriptions on behalf of the sockets.
type eventHub struct {
	node  *runtime.Node
	group string
	log   *slog.Logger

	mu   sync.Mutex
	subs map[string]*meshSub // by canonical pattern

	open                                            atomic.Int64
	events, delivered, dropped, closed, undecodable atomic.Uint64
	lastWarn                                        atomic.Int64 // unix nanoseconds of the last slow-subscriber warning
	warnedDropped, warnedClosed                     atomic.Uint64
}

// slowWarnEvery is the least time between two slow-subscriber warnings:
// a client that cannot keep up with a busy pattern would otherwise log a
// line per event.
const slowWarnEvery = 10 * time.Second

func newEventHub(node *runtime.Node, log *slog.Logger) *eventHub {
	return &eventHub{node: node, group: node.ID(), log: log, subs: make(map[string]*meshSub)}
}

// meshSub is one subscription of the node and the sockets' subscriptions
// it serves, copied on write so that the fan-out reads them without a
// lock.
type meshSub struct {
	pattern string
	socks   atomic.Pointer[[]*wsSub]
}

// wsSub is one socket's subscription.
type wsSub struct {
	wc      *wsConn
	id      string
	pattern string      // canonical
	prefix  []byte      // the event frame up to its data
	live    atomic.Bool // acknowledged and not removed: events go out
	added   bool        // in the hub, under the hub's mu
}

func newWSSub(wc *wsConn, id, pattern string) *wsSub {
	s := &wsSub{wc: wc, id: id, pattern: pattern}
	s.prefix = append(append(append(append([]byte(`{"type":"event","sub":`), jsonString(id)...), `,"pattern":`...), jsonString(pattern)...), `,"data":`...)
	return s
}

func jsonString(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

// add makes s receive the events of its pattern, subscribing the node
// to the pattern if no socket has yet.
func (h *eventHub) add(s *wsSub) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	ms := h.subs[s.pattern]
	if ms == nil {
		ms = &meshSub{pattern: s.pattern}
		ms.socks.Store(&[]*wsSub{})
		if err := h.node.Subscribe(s.pattern, h.group, ms.handle(h)); err != nil {
			return err
		}
		h.subs[s.pattern] = ms
	}
	socks := append(slices.Clone(*ms.socks.Load()), s)
	ms.socks.Store(&socks)
	s.added = true
	h.open.Add(1)
	return nil
}

// remove stops s's events, unsubscribing the node from the pattern when
// s was its last socket. Removing twice is harmless.
func (h *eventHub) remove(s *wsSub) {
	s.live.Store(false)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !s.added {
		return
	}
	s.added = false
	h.open.Add(-1)
	ms := h.subs[s.pattern]
	socks := slices.DeleteFunc(slices.Clone(*ms.socks.Load()), func(x *wsSub) bool { return x == s })
	ms.socks.Store(&socks)
	if len(socks) > 0 {
		return
	}
	delete(h.subs, s.pattern)
	if _, err := h.node.Unsubscribe(s.pattern, h.group); err != nil {
		h.log.Warn("gateway: events: unsubscribing the node failed", "pattern", s.pattern, "err", err)
	}
}

// handle is the node's handler of ms's pattern: the event's message as
// JSON once, then a frame for each socket.
func (ms *meshSub) handle(h *eventHub) runtime.Handler {
	return func(ctx context.Context, req runtime.Request) (any, error) {
		h.events.Add(1)
		data, err := eventData(req)
		if err != nil {
			h.undecodable.Add(1)
			h.log.Error("gateway: events: an event's message cannot be written as JSON", "pattern", ms.pattern, "err", err)
			return nil, nil // the emitter's event was taken; no socket can read it
		}
		for _, s := range *ms.socks.Load() {
			if !s.live.Load() {
				continue
			}
			b := make([]byte, 0, len(s.prefix)+len(data)+1)
			b = append(append(append(b, s.prefix...), data...), '}')
			s.wc.pushEvent(b)
		}
		return nil, nil
	}
}

// eventData returns an event's message as JSON: a remote JSON message
// as it came, anything else through its JSON encoding (protobuf with
// protojson).
func eventData(req runtime.Request) (json.RawMessage, error) {
	var out *answer
	if err := req.Decode(&out); err != nil {
		return nil, err
	}
	if out == nil || len(out.json) == 0 {
		return json.RawMessage("null"), nil
	}
	if !jsonscan.Valid(out.json) {
		return nil, errInvalidJSON
	}
	return out.json, nil
}

var errInvalidJSON = runtime.Errorf(runtime.CodeInternal, "wizard: gateway: the event's message is not valid JSON")

// slow counts a frame dropped (or a connection closed, closed true) for
// a full event queue and logs it, at most once per slowWarnEvery, with
// the counts since the last warning.
func (h *eventHub) slow(wc *wsConn, closed bool) {
	if closed {
		h.closed.Add(1)
	} else {
		h.dropped.Add(1)
	}
	now := time.Now().UnixNano()
	last := h.lastWarn.Load()
	if now-last < int64(slowWarnEvery) || !h.lastWarn.CompareAndSwap(last, now) {
		return
	}
	d, c := h.dropped.Load(), h.closed.Load()
	dd, dc := d-h.warnedDropped.Swap(d), c-h.warnedClosed.Swap(c)
	h.log.Warn("gateway: events: slow subscribers", "remote", wc.ip, "queue", wc.ws.eventQueue,
		"overflow", overflowName(wc.ws.eventClose), "dropped", dd, "closed", dc)
}

func overflowName(close bool) string {
	if close {
		return string(config.OverflowClose)
	}
	return string(config.OverflowDropOldest)
}
