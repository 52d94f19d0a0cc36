package gateway

import (
	"net/http"
	"strconv"

	"github.com/wizardmesh/wizard/gateway/auth"
	"github.com/wizardmesh/wizard/gateway/config"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// A connection's event subscriptions: sub and unsub frames, and the
// events they bring.

// keptClaims returns the claims of id that event templates read
// (names), or nil.
func keptClaims(id *auth.Identity, names []string) map[string]any {
	if id == nil || len(id.Claims) == 0 || len(names) == 0 {
		return nil
	}
	var out map[string]any
	for _, n := range names {
		if v, ok := id.Claims[n]; ok {
			if _, scalar := config.ClaimString(v); scalar {
				if out == nil {
					out = make(map[string]any, len(names))
				}
				out[n] = v
			}
		}
	}
	return out
}

// subscribe serves a sub frame: it checks the pattern against the routes
// that allow events, adds the subscription and answers; events follow
// the answer.
func (wc *wsConn) subscribe(f inFrame) {
	id := *f.ID
	l := wc.g.now()
	wc.mu.Lock()
	ident, claims := wc.id, wc.claims
	var e *apiError
	switch {
	case wc.draining:
		e = newAPIError(http.StatusServiceUnavailable, runtime.CodeUnavailable, "the gateway is shutting down")
		e.retryAfter = retryAfter
	case wc.subs[id] != nil:
		e = badRequest("subscription id " + id + " is open on this connection already")
	case len(wc.subs) >= wc.ws.maxSubs:
		e = newAPIError(http.StatusTooManyRequests, runtime.CodeResourceExhausted, "too many subscriptions open on this connection (at most "+strconv.Itoa(wc.ws.maxSubs)+"): end one first")
	}
	wc.mu.Unlock()
	var pat string
	if e == nil {
		pat, e = allowedEvent(l.events, f, ident, claims)
	}
	if e != nil {
		wc.enqueue(subFrame(frameSub, f.ID, "", e))
		return
	}
	s := newWSSub(wc, id, pat)
	wc.mu.Lock()
	if wc.closed.Load() || wc.subs[id] != nil {
		wc.mu.Unlock()
		return
	}
	if wc.subs == nil {
		wc.subs = make(map[string]*wsSub)
	}
	wc.subs[id] = s
	wc.mu.Unlock()
	if err := wc.g.events.add(s); err != nil {
		wc.mu.Lock()
		delete(wc.subs, id)
		wc.mu.Unlock()
		wc.g.log.Error("gateway: events: the node cannot subscribe", "pattern", pat, "err", err)
		wc.enqueue(subFrame(frameSub, f.ID, "", newAPIError(http.StatusInternalServerError, runtime.CodeInternal, "internal error")))
		return
	}
	if wc.closed.Load() {
		wc.g.events.remove(s) // closed meanwhile: its closer may have missed s
		return
	}
	// The answer is queued before the first event: replies go out
	// before events.
	wc.enqueue(subFrame(frameSub, f.ID, pat, nil))
	s.live.Store(true)
}

// allowedEvent returns the pattern a sub frame may subscribe to: its
// own pattern, or its route's only entry, filled from the identity and
// within an entry of a route whose auth and scopes the identity passes.
// Otherwise the refusal: of a route the frame names, its auth error
// (401, 403) or a template the identity cannot fill (403); of a pattern
// alone, the auth error when no route passed, a template that cannot be
// filled among those whose keys the pattern holds, or no entry allowing
// the pattern (403).
func allowedEvent(routes []eventRoute, f inFrame, id *auth.Identity, claims map[string]any) (string, *apiError) {
	var want pattern.Pattern
	if f.Pattern != "" {
		p, err := pattern.Parse(f.Pattern)
		if err != nil || p.Len() == 0 {
			return "", badRequest("sub frame's pattern is not a pattern of at least one key")
		}
		want = p
	}
	subject := ""
	if id != nil {
		subject = id.Subject
	}
	var authErr, fillErr *apiError
	found, passed := false, false
	for _, r := range routes {
		if f.Route != "" && r.policy.name != f.Route {
			continue
		}
		found = true
		if e := authorize(r.policy, id); e != nil {
			authErr = cmpErr(authErr, e)
			continue
		}
		passed = true
		if f.Pattern == "" && len(r.templates) > 1 {
			return "", badRequest("route " + strconv.Quote(r.policy.name) + " allows " + strconv.Itoa(len(r.templates)) + " event patterns: name one in the sub frame's pattern")
		}
		for _, t := range r.templates {
			entry, err := t.Fill(subject, claims)
			switch {
			case err != nil && (f.Pattern == "" || hasKeys(want, t.Keys())):
				fillErr = cmpErr(fillErr, newAPIError(http.StatusForbidden, runtime.CodePermissionDenied, "route "+strconv.Quote(r.policy.name)+": events "+strconv.Quote(t.String())+": "+err.Error()))
			case err != nil:
			case f.Pattern == "":
				return entry.String(), nil
			case config.Covers(entry, want):
				return want.String(), nil
			}
		}
	}
	switch {
	case f.Route != "" && !found:
		return "", newAPIError(http.StatusNotFound, runtime.CodeNotFound, "no route named "+strconv.Quote(clipString(f.Route, 100))+" allows events")
	case !passed && authErr != nil:
		return "", authErr
	case fillErr != nil:
		return "", fillErr
	}
	return "", newAPIError(http.StatusForbidden, runtime.CodePermissionDenied, "no route allows this connection events of "+strconv.Quote(clipString(want.String(), 200)))
}

// hasKeys reports whether p holds every one of keys.
func hasKeys(p pattern.Pattern, keys []string) bool {
	for _, k := range keys {
		if _, ok := p.Get(k); !ok {
			return false
		}
	}
	return true
}

// cmpErr keeps the first refusal.
func cmpErr(first, e *apiError) *apiError {
	if first != nil {
		return first
	}
	return e
}

// unsubscribe serves an unsub frame: the subscription ends (events
// queued already may still follow the answer).
func (wc *wsConn) unsubscribe(id *string) {
	wc.mu.Lock()
	s := wc.subs[*id]
	delete(wc.subs, *id)
	wc.mu.Unlock()
	if s == nil {
		wc.enqueue(subFrame(frameUnsub, id, "", newAPIError(http.StatusNotFound, runtime.CodeNotFound, "no subscription "+*id+" on this connection")))
		return
	}
	wc.g.events.remove(s)
	wc.enqueue(subFrame(frameUnsub, id, s.pattern, nil))
}

// recheckSubs checks the open subscriptions again against the
// connection's identity, as refreshed by an auth frame: one its scopes
// or claims no longer allow ends, told by an unsub frame with the
// refusal.
func (wc *wsConn) recheckSubs() {
	l := wc.g.now()
	wc.mu.Lock()
	ident, claims := wc.id, wc.claims
	var ended []*wsSub
	var why []*apiError
	for id, s := range wc.subs {
		if _, e := allowedEvent(l.events, inFrame{Pattern: s.pattern}, ident, claims); e != nil {
			delete(wc.subs, id)
			ended, why = append(ended, s), append(why, e)
		}
	}
	wc.mu.Unlock()
	for i, s := range ended {
		wc.g.events.remove(s)
		wc.enqueue(subFrame(frameUnsub, &s.id, s.pattern, why[i]))
	}
}

// subFrame is the answer to a sub or unsub frame: ok with the
// subscription's pattern, or e.
func subFrame(typ string, id *string, pat string, e *apiError) []byte {
	ok := e == nil
	out := outFrame{Type: typ, ID: id, OK: &ok, Pattern: pat}
	if e != nil {
		eb := e.body()
		out.Status, out.Error = e.status, &eb
		out.RetryAfterMs = int64(e.retryAfter) * 1000
	}
	return marshalFrame(out)
}

// pushEvent queues an event frame: a full event queue drops its oldest
// or closes the connection (4008), as websocket.event_overflow says.
func (wc *wsConn) pushEvent(b []byte) {
	if wc.closed.Load() {
		return
	}
	h := wc.g.events
	ok, write, dropped := wc.send.pushEvent(outMsg{b: b}, !wc.ws.eventClose)
	switch {
	case !ok:
		h.slow(wc, true)
		wc.closeWith(closeSlowConsumer, "slow consumer: event queue full")
		return
	case dropped:
		h.slow(wc, false)
	}
	h.delivered.Add(1)
	if write {
		wc.startWriter()
	}
}
