package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/gateway/config"
	"github.com/wizardmesh/wizard/runtime"
)

// eventsYAML is the gateway of the event tests: a route whose events
// are the subject's matches and the team's news (a claim).
const eventsYAML = `
auth: {jwt: {keys: [unused.pem], algorithms: [ES256]}}
websocket: {path: /ws, max_subscriptions_per_conn: 3, event_queue: $QUEUE, event_overflow: $OVERFLOW}
routes:
  - name: matches
    method: GET
    path: /api/matches
    pattern: "role:match,cmd:list"
    events: ["role:match,event:found,user:{auth.subject}"]
  - name: team
    method: GET
    path: /api/team
    pattern: "role:team,cmd:list"
    events: ["role:team,team:{auth.claims.team}", "role:team,user:{auth.subject}"]
  - name: admin
    method: GET
    path: /api/admin
    pattern: "role:admin,cmd:list"
    scopes: [admin]
    events: ["role:admin"]
`

// eventTokens are the event tests' identities.
var eventTokens = testVerifier{
	"u1": {Subject: "u1", Issuer: "test", Claims: map[string]any{"team": "red"}},
	"u2": {Subject: "u2", Issuer: "test", Claims: map[string]any{"team": "blue"}},
	// u1-moved is u1 refreshed after a move to another team.
	"u1-moved": {Subject: "u1", Issuer: "test", Claims: map[string]any{"team": "blue"}},
	"star":     {Subject: "*", Issuer: "test"},
	"admin":    {Subject: "root", Issuer: "test", Scopes: []string{"admin"}},
}

// eventGateway is a gateway of eventsYAML on node, with an event queue
// of queue and its overflow policy.
func eventGateway(t testing.TB, node *runtime.Node, queue int, overflow string) *testGateway {
	t.Helper()
	yaml := strings.NewReplacer("$QUEUE", fmt.Sprint(queue), "$OVERFLOW", overflow).Replace(eventsYAML)
	cfg, err := config.Parse("events.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	g, err := New(node, cfg, WithVerifier(eventTokens), WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	return serveTestGateway(t, g, nil, logs)
}

// eventMesh is a gateway's node and an emitter's, over TCP.
func eventMesh(t testing.TB) (gw, emitter *runtime.Node) {
	t.Helper()
	gw = newNode(t, runtime.WithService("gateway"))
	emitter = newNode(t, runtime.WithService("match"), runtime.WithDiscovery(runtime.StaticPeers(gw.Addr())))
	return gw, emitter
}

// subscribed dials the gateway as token and subscribes sub (a sub
// frame's fields); it returns the connection once the sub is answered ok.
func subscribed(t *testing.T, tg *testGateway, token string, subs ...map[string]any) *websocket.Conn {
	t.Helper()
	c := dialWS(t, tg.ws+"?access_token="+token, nil)
	for _, s := range subs {
		sendFrame(t, c, s)
		if f := mustReadFrame(t, c); f.Type != frameSub || f.OK == nil || !*f.OK {
			t.Fatalf("sub %v answered %+v", s, f)
		}
	}
	return c
}

// emitTo emits an event once the gateway's subscription of it is known
// to the emitter.
func emitTo(t *testing.T, emitter *runtime.Node, pat string, msg any) runtime.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	if err := emitter.WaitForSubscribers(ctx, pat); err != nil {
		t.Fatalf("WaitForSubscribers(%s): %v", pat, err)
	}
	d, err := emitter.Emit(ctx, pat, msg)
	if err != nil {
		t.Fatalf("Emit(%s): %v", pat, err)
	}
	return d
}

// TestEventPush: over a real mesh (the gateway's node and an emitter's,
// TCP), two users' sockets subscribe to the route's events by naming the
// route; an event emitted for each user reaches that user's socket only,
// as an event frame of the subscription's id, with the event's message;
// the emit's Delivery names the gateway's group, its node id.
func TestEventPush(t *testing.T) {
	gw, emitter := eventMesh(t)
	tg := eventGateway(t, gw, 8, "drop_oldest")
	c1 := subscribed(t, tg, "u1", map[string]any{"type": "sub", "id": "m", "route": "matches"})
	c2 := subscribed(t, tg, "u2", map[string]any{"type": "sub", "id": "m2", "pattern": "role:match,event:found,user:u2"})

	d := emitTo(t, emitter, "role:match,event:found,user:u1", map[string]any{"opponent": "u9", "n": 1})
	if diff := cmp.Diff([]string{gw.ID()}, d.Took); diff != "" {
		t.Errorf("Delivery.Took (-want +got):\n%s", diff)
	}
	emitTo(t, emitter, "role:match,event:found,user:u2", map[string]any{"opponent": "u8", "n": 2})

	for _, tc := range []struct {
		c        *websocket.Conn
		sub, pat string
		n        float64
	}{{c1, "m", "event:found,role:match,user:u1", 1}, {c2, "m2", "event:found,role:match,user:u2", 2}} {
		f := mustReadFrame(t, tc.c)
		var data map[string]any
		if err := json.Unmarshal(f.Data, &data); err != nil {
			t.Fatalf("event %+v: %v", f, err)
		}
		if f.Type != frameEvent || f.Sub != tc.sub || f.Pattern != tc.pat || data["n"] != tc.n {
			t.Errorf("event frame %+v (data %s), want sub %s, pattern %s, n %v", f, f.Data, tc.sub, tc.pat, tc.n)
		}
	}
	// Each socket heard one event: a ping's answer comes next, not
	// another user's event.
	for _, c := range []*websocket.Conn{c1, c2} {
		sendRaw(t, c, []byte(`{}`))
		if f := mustReadFrame(t, c); f.Type != "" {
			t.Errorf("after the user's own event: %+v, want the ping's answer", f)
		}
	}
	if s := tg.EventStats(); s.Subscriptions != 2 || s.MeshSubscriptions != 2 || s.Events != 2 || s.Delivered != 2 {
		t.Errorf("EventStats %+v", s)
	}
}

// TestEventRefusals: a sub frame is checked against the routes' events
// after filling them from the connection's identity: a client cannot
// widen (another user's events, a pattern without the user key, a glob,
// a subject that is a glob); a route's auth and scopes apply; and the
// frame's own mistakes are named.
func TestEventRefusals(t *testing.T) {
	gw, _ := eventMesh(t)
	tg := eventGateway(t, gw, 8, "drop_oldest")
	for _, tc := range []struct {
		name, token string
		sub         map[string]any
		status      int
		msg         string
	}{
		{"another user", "u1", map[string]any{"pattern": "role:match,event:found,user:u2"}, 403, `no route allows this connection events of "event:found,role:match,user:u2"`},
		{"no user key", "u1", map[string]any{"pattern": "role:match,event:found"}, 403, `no route allows this connection events of "event:found,role:match"`},
		{"user glob", "u1", map[string]any{"pattern": "role:match,event:found,user:*"}, 403, `no route allows this connection events of "event:found,role:match,user:*"`},
		{"other team", "u1", map[string]any{"pattern": "role:team,team:blue"}, 403, `no route allows this connection events of "role:team,team:blue"`},
		{"subject glob", "star", map[string]any{"route": "matches"}, 403, `route "matches": events "role:match,event:found,user:{auth.subject}": {auth.subject} holds '*' or '?', which a pattern reads as a glob`},
		{"no claim", "admin", map[string]any{"pattern": "role:team,team:red"}, 403, `route "team": events "role:team,team:{auth.claims.team}": {auth.claims.team} has no value: the token has no claim "team" that is a string, a number or a boolean`},
		{"no token", "", map[string]any{"route": "matches"}, 401, ""},
		{"scope", "u1", map[string]any{"route": "admin"}, 403, ""},
		{"route of several", "u1", map[string]any{"route": "team"}, 400, `route "team" allows 2 event patterns: name one in the sub frame's pattern`},
		{"no such route", "u1", map[string]any{"route": "nope"}, 404, `no route named "nope" allows events`},
		{"bad pattern", "u1", map[string]any{"pattern": "role:"}, 400, "sub frame's pattern is not a pattern of at least one key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := tg.ws
			if tc.token != "" {
				url += "?access_token=" + tc.token
			}
			c := dialWS(t, url, nil)
			tc.sub["type"], tc.sub["id"] = "sub", "s"
			sendFrame(t, c, tc.sub)
			f := mustReadFrame(t, c)
			if f.Type != frameSub || f.OK == nil || *f.OK || f.Status != tc.status || f.Error == nil || (tc.msg != "" && f.Error.Message != tc.msg) {
				t.Errorf("answered %+v (error %+v), want %d %q", f, f.Error, tc.status, tc.msg)
			}
		})
	}
	t.Run("narrower", func(t *testing.T) {
		c := dialWS(t, tg.ws+"?access_token=u1", nil)
		sendFrame(t, c, map[string]any{"type": "sub", "id": "n", "pattern": "role:match,event:found,user:u1,mode:ranked"})
		if f := mustReadFrame(t, c); !*f.OK || f.Pattern != "event:found,mode:ranked,role:match,user:u1" {
			t.Errorf("a narrower pattern answered %+v", f)
		}
		sendFrame(t, c, map[string]any{"type": "sub", "id": "n", "pattern": "role:team,team:red"})
		if f := mustReadFrame(t, c); *f.OK || f.Status != 400 {
			t.Errorf("an id open already answered %+v", f)
		}
		sendFrame(t, c, map[string]any{"type": "sub", "id": "t", "pattern": "role:team,team:red"})
		sendFrame(t, c, map[string]any{"type": "sub", "id": "u", "pattern": "role:team,user:u1"})
		sendFrame(t, c, map[string]any{"type": "sub", "id": "v", "pattern": "role:team,user:u1,x:1"})
		for _, want := range []int{0, 0, 429} {
			if f := mustReadFrame(t, c); f.Status != want {
				t.Errorf("%+v, want status %d (at most 3 subscriptions)", f, want)
			}
		}
		sendFrame(t, c, map[string]any{"type": "unsub", "id": "zz"})
		if f := mustReadFrame(t, c); f.Type != frameUnsub || *f.OK || f.Status != 404 {
			t.Errorf("unsub of no subscription answered %+v", f)
		}
	})
}

// TestEventFanOutShared: sockets subscribed to one pattern share one
// subscription of the node, each hearing every event; it goes when the
// last of them leaves (an unsub frame, a closed socket), and an emit
// then finds no subscriber.
func TestEventFanOutShared(t *testing.T) {
	gw, emitter := eventMesh(t)
	tg := eventGateway(t, gw, 8, "drop_oldest")
	const pat = "role:match,event:found,user:u1"
	sub := map[string]any{"type": "sub", "id": "m", "route": "matches"}
	a := subscribed(t, tg, "u1", sub)
	b := subscribed(t, tg, "u1", sub)
	c := subscribed(t, tg, "u1", sub)
	if s := tg.EventStats(); s.Subscriptions != 3 || s.MeshSubscriptions != 1 {
		t.Fatalf("EventStats %+v, want 3 sockets on 1 node subscription", s)
	}
	emitTo(t, emitter, pat, map[string]any{"n": 1})
	for _, conn := range []*websocket.Conn{a, b, c} {
		if f := mustReadFrame(t, conn); f.Type != frameEvent || f.Sub != "m" {
			t.Errorf("%+v, want the event", f)
		}
	}
	sendFrame(t, a, map[string]any{"type": "unsub", "id": "m"})
	if f := mustReadFrame(t, a); f.Type != frameUnsub || !*f.OK || f.Pattern != "event:found,role:match,user:u1" {
		t.Errorf("unsub answered %+v", f)
	}
	b.Close(websocket.StatusNormalClosure, "")
	until(t, "one socket left", func() bool { return tg.EventStats().Subscriptions == 1 })
	if s := tg.EventStats(); s.MeshSubscriptions != 1 {
		t.Errorf("EventStats %+v: the node's subscription went with a socket still on it", s)
	}
	emitTo(t, emitter, pat, map[string]any{"n": 2})
	if f := mustReadFrame(t, c); f.Type != frameEvent {
		t.Errorf("%+v, want the second event", f)
	}
	c.Close(websocket.StatusNormalClosure, "")
	until(t, "the node's subscription gone", func() bool { return tg.EventStats().MeshSubscriptions == 0 })
	ok, err := gw.Unsubscribe(pat, gw.ID())
	if ok || err != nil {
		t.Errorf("the node still had the subscription: %v, %v", ok, err)
	}
	until(t, "the emitter to learn that no one listens", func() bool {
		_, err := emitter.Emit(t.Context(), pat, map[string]any{"n": 3})
		return errors.Is(err, runtime.ErrNoHandler)
	})
}

// TestEventQueueClose: with event_overflow: close, a socket that reads
// nothing while events pour in is closed 4008 with its reason, counted,
// and its subscription goes.
func TestEventQueueClose(t *testing.T) {
	gw, emitter := eventMesh(t)
	tg := eventGateway(t, gw, 2, "close")
	c := subscribed(t, tg, "u1", map[string]any{"type": "sub", "id": "m", "route": "matches"})
	const pat = "role:match,event:found,user:u1"
	big := strings.Repeat("x", 60<<10)
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	if err := emitter.WaitForSubscribers(ctx, pat); err != nil {
		t.Fatal(err)
	}
	// The big field is not a root scalar, so not one of the event's
	// pairs. The socket's TCP buffers take some frames; then the writer blocks
	// and the event queue fills.
	for i := 0; tg.EventStats().Closed == 0; i++ {
		if i > 10_000 {
			t.Fatal("10,000 events of 60 KiB and the unread socket is not closed")
		}
		if _, err := emitter.Emit(ctx, pat, map[string]any{"payload": map[string]any{"big": big}}); err != nil && !errors.Is(err, runtime.ErrNoHandler) {
			t.Fatal(err)
		}
	}
	var ce websocket.CloseError
	for {
		_, err := readFrame(t, c)
		if err == nil {
			continue
		}
		if !errors.As(err, &ce) || ce.Code != closeSlowConsumer || ce.Reason != "slow consumer: event queue full" {
			t.Fatalf("connection ended with %v, want close 4008 slow consumer: event queue full", err)
		}
		break
	}
	until(t, "the subscription gone", func() bool { return tg.EventStats().MeshSubscriptions == 0 })
	if logs := tg.logs.find("gateway: events: slow subscribers"); len(logs) != 1 || logs[0]["closed"] != uint64(1) {
		t.Errorf("slow-subscriber warnings %v, want one counting the close", logs)
	}
}

// TestEventQueueDropOldest: a full event queue under drop_oldest keeps
// the newest events, counts the ones it dropped, and never refuses
// replies room.
func TestEventQueueDropOldest(t *testing.T) {
	q := newSendQueue(2, 3)
	_, write := q.push(outMsg{b: []byte("reply")})
	if !write {
		t.Fatal("the first push does not have the writer's turn")
	}
	dropped := 0
	for i := range 10 {
		ok, write, d := q.pushEvent(outMsg{b: []byte(fmt.Sprint("e", i))}, true)
		if !ok || write {
			t.Fatalf("pushEvent %d: ok %v, write %v", i, ok, write)
		}
		if d {
			dropped++
		}
	}
	if ok, _ := q.push(outMsg{b: []byte("reply2")}); !ok {
		t.Error("a full event queue took a reply's room")
	}
	var got []string
	for {
		m, ok := q.pop()
		if !ok {
			break
		}
		got = append(got, string(m.b))
	}
	if diff := cmp.Diff([]string{"reply", "reply2", "e7", "e8", "e9"}, got); diff != "" {
		t.Errorf("sent (-want +got):\n%s", diff)
	}
	if dropped != 7 {
		t.Errorf("dropped %d, want 7", dropped)
	}
	if len(q.events) > 2*3 {
		t.Errorf("the event queue holds room for %d after the drops", len(q.events))
	}
	q2 := newSendQueue(2, 1)
	q2.pushEvent(outMsg{b: []byte("e0")}, false)
	if ok, _, _ := q2.pushEvent(outMsg{b: []byte("e1")}, false); ok {
		t.Error("a full event queue under close took one more")
	}
}

// TestEventFrames checks the decoding of sub and unsub frames and the
// writing of an event frame.
func TestEventFrames(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want inFrame
		err  string
	}{
		{`{"type":"sub","id":"s1","pattern":"role:match,user:u1"}`, inFrame{Type: "sub", ID: strp("s1"), Pattern: "role:match,user:u1"}, ""},
		{`{"type":"sub","id":"s1","route":"matches"}`, inFrame{Type: "sub", ID: strp("s1"), Route: "matches"}, ""},
		{`{"type":"sub","id":"s\u00e91","route":"matches"}`, inFrame{Type: "sub", ID: strp("sé1"), Route: "matches"}, ""},
		{`{"type":"unsub","id":"s1"}`, inFrame{Type: "unsub", ID: strp("s1")}, ""},
		{`{"type":"sub","id":"s1"}`, inFrame{}, "sub frame needs a pattern or a route"},
		{`{"type":"sub","pattern":"a:b"}`, inFrame{}, "frame has no id"},
		{`{"pattern":"a:b"}`, inFrame{}, "frame has no id"},
		{`{"type":"sub","id":"s1","route":7}`, inFrame{}, `frame field "route" has the wrong type`},
	} {
		f, fe := decodeFrame([]byte(tc.in))
		switch {
		case tc.err != "" && (fe == nil || fe.msg != tc.err):
			t.Errorf("%s: %+v, %+v; want error %q", tc.in, f, fe, tc.err)
		case tc.err == "" && fe != nil:
			t.Errorf("%s: %s", tc.in, fe.msg)
		case tc.err == "":
			if diff := cmp.Diff(tc.want, f); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.in, diff)
			}
		}
	}
	s := newWSSub(nil, `a"b`, "role:match,user:u1")
	b := append(append(s.prefix, `{"n":1}`...), '}')
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	want := map[string]any{"type": "event", "sub": `a"b`, "pattern": "role:match,user:u1", "data": map[string]any{"n": float64(1)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("event frame (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(subFrame(frameSub, strp("x"), "", newAPIError(403, runtime.CodePermissionDenied, "no"))), `"ok":false,"status":403,"error":{"code":"permission_denied","message":"no"}`) {
		t.Errorf("refusal frame %s", subFrame(frameSub, strp("x"), "", newAPIError(403, runtime.CodePermissionDenied, "no")))
	}
}

// TestEventRecheckOnRefresh: a token refreshed by an auth frame (the
// same subject) whose claims no longer allow an open subscription ends
// it, told by an unsub frame with the refusal; the others stay.
func TestEventRecheckOnRefresh(t *testing.T) {
	gw, emitter := eventMesh(t)
	tg := eventGateway(t, gw, 8, "drop_oldest")
	c := subscribed(t, tg, "u1",
		map[string]any{"type": "sub", "id": "team", "pattern": "role:team,team:red"},
		map[string]any{"type": "sub", "id": "m", "route": "matches"})
	sendFrame(t, c, map[string]any{"type": "auth", "id": "a", "token": "u1-moved"})
	if f := mustReadFrame(t, c); f.Type != frameAuth || !*f.OK {
		t.Fatalf("auth answered %+v", f)
	}
	f := mustReadFrame(t, c)
	if f.Type != frameUnsub || *f.ID != "team" || *f.OK || f.Status != 403 || f.Pattern != "role:team,team:red" {
		t.Fatalf("after the refresh: %+v, want the team subscription ended 403", f)
	}
	until(t, "the team's node subscription gone", func() bool { return tg.EventStats().MeshSubscriptions == 1 })
	emitTo(t, emitter, "role:match,event:found,user:u1", map[string]any{"n": 1})
	if f := mustReadFrame(t, c); f.Type != frameEvent || f.Sub != "m" {
		t.Errorf("%+v, want the match event on the subscription that stays", f)
	}
}
