package config

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/runtime/pattern"
)

// eventsFile is a file with the given websocket and route lines (the
// route's name is "matches").
func eventsFile(ws, route string) string {
	return `auth: {jwt: {keys: [k.pem], algorithms: [ES256]}}
` + ws + `
routes:
  - name: matches
    method: GET
    path: /api/matches
    pattern: "role:match,cmd:list"
` + route + "\n"
}

// TestEventsConfig checks a route's events: parsed and kept, with the
// websocket section's event settings and their defaults; and every
// problem naming the route and the field.
func TestEventsConfig(t *testing.T) {
	t.Run("claim names", func(t *testing.T) {
		// Every class's first and last character, and a name of the
		// longest length, are claim names.
		long := strings.Repeat("c", maxVarName)
		c, err := Parse("gateway.yaml", []byte(eventsFile("websocket: {}",
			`    events: ["role:a,x:{auth.claims.aA0_-zZ9},y:{auth.claims.`+long+`}"]`)))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"aA0_-zZ9", long}, c.Routes[0].EventTemplates()[0].Claims()); diff != "" {
			t.Errorf("claims (-want +got):\n%s", diff)
		}
	})
	t.Run("ok", func(t *testing.T) {
		c, err := Parse("gateway.yaml", []byte(eventsFile("websocket: {path: /ws}",
			`    events: ["role:match,event:found,user:{auth.subject}", "role:team,team:{auth.claims.team},user:{auth.subject}", "role:news"]`)))
		if err != nil {
			t.Fatal(err)
		}
		r := c.Routes[0]
		var got []string
		for _, e := range r.EventTemplates() {
			got = append(got, e.String())
		}
		if diff := cmp.Diff(r.Events, got); diff != "" {
			t.Errorf("templates (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"team"}, r.EventTemplates()[1].Claims()); diff != "" {
			t.Errorf("claims (-want +got):\n%s", diff)
		}
		ws := c.WebSocket
		if ws.EventQueue != 64 || ws.EventOverflow != OverflowDropOldest || ws.MaxSubscriptionsPerConn != 32 {
			t.Errorf("defaults: event_queue %d, event_overflow %q, max_subscriptions_per_conn %d", ws.EventQueue, ws.EventOverflow, ws.MaxSubscriptionsPerConn)
		}
	})
	for _, tc := range []struct {
		name, ws, route string
		want            []string
	}{
		{"no websocket", "", `    events: ["role:match,user:{auth.subject}"]`,
			[]string{`routes[0].events: route "matches": events are pushed over the WebSocket only: the file needs a websocket section`}},
		{"path variable", "websocket: {}", `    events: ["role:match,user:{user}"]`,
			[]string{`routes[0].events[0]: route "matches": bad event template "role:match,user:{user}" at offset 16: {user} is not an identity value: an event template takes {auth.subject} or {auth.claims.NAME}`}},
		{"bad claim", "websocket: {}", `    events: ["role:match,user:{auth.claims.a b}"]`,
			[]string{`routes[0].events[0]: route "matches": bad event template "role:match,user:{auth.claims.a b}" at offset 30: bad claim name "a b": letters, digits, '_' or '-'`}},
		{"empty braces", "websocket: {}", `    events: ["role:match,user:{}"]`,
			[]string{`routes[0].events[0]: route "matches": bad event template "role:match,user:{}" at offset 16: {} is not an identity value: an event template takes {auth.subject} or {auth.claims.NAME}`}},
		{"long claim", "websocket: {}", `    events: ["role:match,user:{auth.claims.` + strings.Repeat("c", maxVarName+1) + `}"]`,
			[]string{`routes[0].events[0]: route "matches": bad event template "role:match,user:{auth.claims.` + strings.Repeat("c", maxVarName+1) + `}" at offset 16: {auth.claims.` + strings.Repeat("c", maxVarName+1) + `}: a claim's name is 1 to 64 bytes`}},
		{"key variable", "websocket: {}", `    events: ["role:match,{auth.subject}:x"]`,
			[]string{`routes[0].events[0]: route "matches": bad event template "role:match,{auth.subject}:x" at offset 11: a variable in key "{auth.subject}"; variables fill values only`}},
		{"empty entry", "websocket: {}", `    events: [""]`,
			[]string{`routes[0].events[0]: route "matches": bad event template "" at offset 0: empty; a pattern names at least one key`}},
		{"empty list", "websocket: {}", `    events: []`,
			[]string{`routes[0].events: route "matches": empty list; give the event patterns clients may subscribe to`}},
		{"twice", "websocket: {}", `    events: ["user:{auth.subject},role:match", "role:match,user:{auth.subject}"]`,
			[]string{`routes[0].events[1]: route "matches": "role:match,user:{auth.subject}" is listed twice`}},
		{"auth none", "websocket: {}", "    auth: none\n    events: [\"role:match,user:{auth.subject}\"]",
			[]string{`routes[0].events[0]: route "matches": "role:match,user:{auth.subject}" fills values from the verified identity: the route needs auth required or optional, not none`}},
		{"overflow", "websocket: {event_overflow: drop_newest, event_queue: 0}", `    events: ["role:news"]`,
			[]string{`websocket.event_overflow: want drop_oldest or close, got "drop_newest"`, `websocket.event_queue: must be positive`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("gateway.yaml", []byte(eventsFile(tc.ws, tc.route)))
			if err == nil {
				t.Fatal("parsed; want problems")
			}
			var got []string
			for _, line := range strings.Split(err.Error(), "\n") {
				// without FILE:LINE:COL
				parts := strings.SplitN(line, ": ", 2)
				got = append(got, parts[1])
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			var p *Problem
			if !errors.As(err, &p) || p.Line == 0 {
				t.Errorf("problem without a line: %v", err)
			}
		})
	}
}

// TestEventFill checks filling an event template from an identity: the
// subject and claims of the token, and the refusals of a value missing,
// empty, of another type, or holding a glob that would widen it.
func TestEventFill(t *testing.T) {
	for _, tc := range []struct {
		template string
		subject  string
		claims   map[string]any
		want     string // the canonical pattern; "" with err
		err      string
	}{
		{"role:match,event:found,user:{auth.subject}", "42", nil, "event:found,role:match,user:42", ""},
		{"user:{auth.subject}", "ada lovelace", nil, "user:ada lovelace", ""},
		{"team:t-{auth.claims.team},user:{auth.subject}", "ada", map[string]any{"team": "red"}, "team:t-red,user:ada", ""},
		{"org:{auth.claims.org}", "ada", map[string]any{"org": float64(7)}, "org:7", ""},
		{"admin:{auth.claims.admin}", "ada", map[string]any{"admin": true}, "admin:true", ""},
		{"role:news", "", nil, "role:news", ""},
		{"user:{auth.subject}", "", nil, "", "{auth.subject} is empty"},
		{"team:{auth.claims.team}", "ada", nil, "", `{auth.claims.team} has no value: the token has no claim "team" that is a string, a number or a boolean`},
		{"team:{auth.claims.team}", "ada", map[string]any{"team": ""}, "", "{auth.claims.team} is empty"},
		{"team:{auth.claims.team}", "ada", map[string]any{"team": []any{"a"}}, "", `{auth.claims.team} has no value: the token has no claim "team" that is a string, a number or a boolean`},
		{"user:{auth.subject}", "*", nil, "", "{auth.subject} holds '*' or '?', which a pattern reads as a glob"},
		{"user:u{auth.subject}", "4?", nil, "", "{auth.subject} holds '*' or '?', which a pattern reads as a glob"},
	} {
		t.Run(tc.template+"/"+tc.subject, func(t *testing.T) {
			e, err := parseEvent(tc.template)
			if err != nil {
				t.Fatal(err)
			}
			p, err := e.Fill(tc.subject, tc.claims)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("Fill = %v, %v; want error %q", p, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := p.String(); got != tc.want {
				t.Errorf("Fill = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestCovers checks that a client's pattern stays within an entry: it
// may add pairs (narrower), never drop one or change its value; an
// entry's glob value takes the literal values it matches, not a glob.
func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		entry, p string
		want     bool
	}{
		{"role:match,event:found,user:42", "role:match,event:found,user:42", true},
		{"role:match,event:found,user:42", "role:match,event:found,user:42,mode:ranked", true},
		{"role:match,event:found,user:42", "role:match,event:found", false},
		{"role:match,event:found,user:42", "role:match,event:found,user:43", false},
		{"role:match,event:found,user:42", "role:match,event:found,user:*", false},
		{"role:match,event:found,user:42", "role:match,event:found,user:4?", false},
		{"role:match,user:42", "role:match,user:42,event:*", true},
		{"role:match,event:*,user:42", "role:match,event:found,user:42", true},
		{"role:match,event:*,user:42", "role:match,event:*,user:42", true},
		{"role:match,event:f*,user:42", "role:match,event:*,user:42", false},
		{"role:match,event:f?und,user:42", "role:match,event:found,user:42", true},
		{"role:match,event:f?und,user:42", "role:match,event:fond,user:42", false},
	} {
		if got := Covers(pattern.MustParse(tc.entry), pattern.MustParse(tc.p)); got != tc.want {
			t.Errorf("Covers(%s, %s) = %v, want %v", tc.entry, tc.p, got, tc.want)
		}
	}
}

// TestGlobMatch checks the glob of an entry's value.
func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		glob, s string
		want    bool
	}{
		{"*", "", true}, {"*", "abc", true}, {"a*", "abc", true}, {"a*c", "abbbc", true},
		{"a*c", "abcd", false}, {"?", "é", true}, {"??", "é", false}, {"*b*", "aaa", false},
		{"a*b*c", "axxbyyc", true}, {"abc", "abc", true}, {"abc", "abd", false},
		{"a?c", "xbc", false}, {"a?c", "abc", true}, {"?*", "", false}, {"*?", "a", true},
	} {
		if got := globMatch(tc.glob, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.glob, tc.s, got, tc.want)
		}
	}
}

// TestClaimString checks how a claim's value fills a template: numbers
// below 1e15 in magnitude as integers when whole, others in their
// shortest form.
func TestClaimString(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
		ok   bool
	}{
		{"u1", "u1", true}, {true, "true", true}, {false, "false", true},
		{42.0, "42", true}, {-42.0, "-42", true}, {1.5, "1.5", true},
		{999999999999999.0, "999999999999999", true}, {-999999999999999.0, "-999999999999999", true},
		{1e15, "1e+15", true}, {-1e15, "-1e+15", true},
		{json.Number("7"), "7", true}, {7, "7", true}, {int64(-7), "-7", true},
		{nil, "", false}, {[]any{"a"}, "", false}, {map[string]any{}, "", false},
	} {
		if got, ok := ClaimString(tc.v); got != tc.want || ok != tc.ok {
			t.Errorf("ClaimString(%#v) = %q, %v; want %q, %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

// TestUsesIdentity: a template uses the identity when it holds a
// subject or claim variable, only then.
func TestUsesIdentity(t *testing.T) {
	for src, want := range map[string]bool{
		"role:news": false, "role:match,user:{auth.subject}": true, "role:team,team:{auth.claims.team}": true,
	} {
		e, err := parseEvent(src)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.UsesIdentity(); got != want {
			t.Errorf("%s: UsesIdentity() = %v, want %v", src, got, want)
		}
	}
}
