package main

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestCommands runs each command against a mesh of three nodes over TCP,
// comparing the text output with goldens and parsing the JSON output back.
func TestCommands(t *testing.T) {
	m := newTestMesh(t, "tcp", nil)

	t.Run("act", func(t *testing.T) {
		tests := []struct {
			name  string
			stdin string
			args  []string
			want  string // the answer, compact JSON
		}{
			{"typed", "", []string{"cmd:sum,role:math", "values:[1,2,3.5]"}, `{"sum":6.5}`},
			{"typed JSON", "", []string{"role:math,cmd:product", `{"values":[2,3,7]}`}, `{"product":42}`},
			{"typed message", "", []string{"role:math,cmd:sum,values:[1,2]"}, `{"sum":3}`},
			{"typed stdin", `{"values":[4]}`, []string{"cmd:sum,role:math", "-"}, `{"sum":4}`},
			{"untyped message", "", []string{"role:echo,n:1,tags:[x]"}, `{"msg":{"n":1,"role":"echo","tags":["x"]},"trace":""}`},
			{"untyped data", "", []string{"role:echo", "n:1"}, `{"msg":{"n":1},"trace":""}`},
			{"metadata", "", []string{"--metadata", "trace=abc", "role:echo", "{}"}, `{"msg":{},"trace":"abc"}`},
			{"mixin", "", []string{"--mixin", "cmd", "role:x", "cmd:get"}, `{"pattern":"role:x,cmd:get"}`},
			{"glob", "", []string{"role:x,cmd:put"}, `{"pattern":"role:x,cmd:*"}`},
			{"precedence", "", []string{"a:1,b:2"}, `{"pattern":"a:1"}`},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := wizard(t, tt.stdin, append(append([]string{"act"}, m.flags()...), tt.args...)...)
				if r.code != 0 {
					t.Fatalf("exit %d: %s", r.code, r.err)
				}
				var got any
				if err := json.Unmarshal([]byte(r.out), &got); err != nil {
					t.Fatalf("answer %q: %v", r.out, err)
				}
				var want any
				json.Unmarshal([]byte(tt.want), &want)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("answer (-want +got):\n%s", diff)
				}
			})
		}
	})

	t.Run("act stream", func(t *testing.T) {
		// docs/cli.md's examples: the example service's streams.
		tests := []struct {
			name  string
			stdin string
			args  []string
			want  string // the JSON lines
		}{
			{"server", "", []string{"role:math,cmd:count", "n:3"}, `{"value":"1"}` + "\n" + `{"value":"2"}` + "\n" + `{"value":"3"}` + "\n"},
			{"client", "value:1\nvalue:2.5\n", []string{"role:math,cmd:total", "-"}, `{"count":"2","sum":3.5}` + "\n"},
			{"bidi", "text:hi\ntext:there\n", []string{"role:math,cmd:echo", "-"}, `{"text":"hi"}` + "\n" + `{"text":"there"}` + "\n"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := wizard(t, tt.stdin, append(append([]string{"act", "--stream"}, m.flags()...), tt.args...)...)
				if r.code != 0 || r.err != "" {
					t.Fatalf("exit %d: %s", r.code, r.err)
				}
				if diff := cmp.Diff(tt.want, r.out); diff != "" {
					t.Errorf("stdout (-want +got):\n%s", diff)
				}
			})
		}
		r := m.run(t, "act", "--stream", "role:math,cmd:count", "n:-1")
		if want := "wizard act: invalid_argument: mathsvc: count to -1: n cannot be negative\n"; r.code != 64+3 || r.err != want {
			t.Errorf("count to -1: exit %d, stderr %q; want exit 67, %q", r.code, r.err, want)
		}
	})

	t.Run("act no reply", func(t *testing.T) {
		r := m.run(t, "act", "--no-reply", "role:echo", "n:1")
		if r.code != 0 || r.out != "" {
			t.Errorf("exit %d, out %q, err %q; want 0 and nothing", r.code, r.out, r.err)
		}
	})

	t.Run("act errors", func(t *testing.T) {
		tests := []struct {
			name string
			args []string
			code int
			err  string // on the standard error
		}{
			{"handler error", []string{"cmd:div,role:math", "dividend:1,divisor:0"}, 64 + 3, "wizard act: invalid_argument: mathsvc: division of 1 by zero\n"},
			{"unknown pattern", []string{"role:nobody,cmd:x"}, 64 + 5, "wizard act: not_found: no handler matches \"cmd:x,role:nobody\"\n"},
			{"malformed data", []string{"cmd:sum,role:math", "values:[1,2"}, 2, "wizard act: DATA: at offset 11 (line 1, column 12): unterminated list: missing ']'\n  values:[1,2\n             ^\n"},
			{"malformed pattern", []string{"role:", "{}"}, 2, "wizard act: PATTERN: wizard: bad pattern \"role:\" at offset 5: missing value for key \"role\"\n"},
			{"wrong type", []string{"cmd:sum,role:math", "values:x"}, 2, "wizard act: DATA: invalid_argument: does not fit wizard.examples.math.v1.SumRequest"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := m.run(t, "act", tt.args...)
				if r.code != tt.code || !strings.HasPrefix(r.err, tt.err) {
					t.Errorf("exit %d, stderr:\n%s\nwant exit %d, stderr starting:\n%s", r.code, r.err, tt.code, tt.err)
				}
			})
		}
		r := m.run(t, "act", "--output", "json", "cmd:sum,role:math", "values:[1,")
		var body struct {
			Error struct {
				Code   string
				Offset *int
			}
		}
		if err := json.Unmarshal([]byte(r.out), &body); err != nil || body.Error.Code != "invalid_argument" || body.Error.Offset == nil || *body.Error.Offset != 10 {
			t.Errorf("JSON error %q (%v): want invalid_argument at offset 10", r.out, err)
		}
	})

	t.Run("members", func(t *testing.T) {
		r := m.run(t, "members")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		golden(t, "members", sortRows(m.mask(r.out), 2))
		r = m.run(t, "members", "--output", "json")
		var ms []memberJSON
		if err := json.Unmarshal([]byte(r.out), &ms); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, mb := range ms[1:] {
			ids = append(ids, mb.ID)
			if !mb.Connected || mb.Patterns == 0 || mb.Transport != "tcp" {
				t.Errorf("member %+v: want connected over tcp with patterns", mb)
			}
		}
		if !ms[0].Self || len(ms) != 4 {
			t.Errorf("members %+v: want wizard first, then three nodes", ms)
		}
		strings.Join(ids, ",")
	})

	t.Run("patterns", func(t *testing.T) {
		r := m.run(t, "patterns")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		golden(t, "patterns", m.mask(r.out))
		r = m.run(t, "patterns", "--output", "json", "cmd:*,role:math")
		var ps []patternJSON
		if err := json.Unmarshal([]byte(r.out), &ps); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range ps {
			got = append(got, p.Pattern)
			if len(p.Targets) != 2 || p.Request == "" {
				t.Errorf("%s: %d targets, request %q; want the two math nodes, typed", p.Pattern, len(p.Targets), p.Request)
			}
		}
		want := []string{"cmd:add,role:math", "cmd:count,role:math", "cmd:div,role:math", "cmd:echo,role:math",
			"cmd:product,role:math", "cmd:sum,role:math", "cmd:total,role:math"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("patterns matching the glob (-want +got):\n%s", diff)
		}
	})

	t.Run("explain", func(t *testing.T) {
		for _, tt := range []struct{ name, arg string }{
			{"exact_over_glob", "a:1,b:2"},
			{"deeper", "a:1,b:1"},
			{"glob", "role:x,cmd:get"},
			{"glob_wins", `{"role":"x","cmd":"put","n":[1]}`},
			{"typed", "role:math,cmd:sum"},
			{"nested", "role:x,cmd:put,n:[1]"}, // a message: n does not route
			{"not_found", "role:nobody"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				r := m.run(t, "explain", tt.arg)
				if r.code != 0 {
					t.Fatalf("exit %d: %s", r.code, r.err)
				}
				out := m.mask(r.out)
				golden(t, "explain_"+tt.name, out)
			})
		}
		r := m.run(t, "explain", "--output", "json", "a:1,b:2")
		var x explainJSON
		if err := json.Unmarshal([]byte(r.out), &x); err != nil {
			t.Fatal(err)
		}
		if x.Winner != "a:1" || len(x.Candidates) != 2 || x.Candidates[1].Rule != "exact-before-glob" || x.Candidates[1].Key != "a" {
			t.Errorf("explain a:1,b:2: %+v; want a:1 over a:*,b:2 by exact-before-glob at a", x)
		}
	})

	t.Run("describe", func(t *testing.T) {
		r := m.run(t, "describe", "role:math,cmd:sum")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		golden(t, "describe", strings.ReplaceAll(strings.ReplaceAll(m.mask(r.out), "node-a", "NODE"), "node-c", "NODE"))
		r = m.run(t, "describe", "role:echo")
		if want := "role:echo is untyped: its handler (node node-b) takes and answers any JSON\n"; r.out != want {
			t.Errorf("describe role:echo: %q, want %q", r.out, want)
		}
		r = m.run(t, "describe", "--output", "json", "cmd:div,role:math")
		var d describeJSON
		if err := json.Unmarshal([]byte(r.out), &d); err != nil || d.Method != "wizard.examples.math.v1.MathService/Divide" || len(d.Messages) != 2 {
			t.Errorf("describe JSON %s (%v)", r.out, err)
		}
	})

	t.Run("bench", func(t *testing.T) {
		r := m.run(t, "bench", "--output", "json", "-c", "2", "-d", "300ms", "-warmup", "50ms", "cmd:sum,role:math", "values:[1,2]")
		var b benchJSON
		if err := json.Unmarshal([]byte(r.out), &b); err != nil {
			t.Fatalf("bench: exit %d, %q: %v (%s)", r.code, r.out, err, r.err)
		}
		if r.code != 0 || b.Calls == 0 || len(b.Errors) != 0 || b.Callers != 2 || b.Typed != "wizard.examples.math.v1.SumRequest" || b.P50MS <= 0 || b.MaxMS < b.P99MS || b.P99MS < b.P50MS {
			t.Errorf("bench: exit %d, %+v; want calls, no errors, ordered percentiles", r.code, b)
		}
		r = m.run(t, "bench", "-c", "1", "-d", "100ms", "cmd:div,role:math", "dividend:1,divisor:0")
		if r.code != 1 || !strings.Contains(r.out, "errors    invalid_argument ") || r.err != "" {
			t.Errorf("bench of failing calls: exit %d, out:\n%s\nerr: %s\nwant exit 1, errors by code, no progress line (not a terminal)", r.code, r.out, r.err)
		}
		// Calls slower than the window (role:slow answers at the
		// timeout): the bench measures until one ends, not zero calls.
		r = m.run(t, "bench", "--output", "json", "--timeout", "300ms", "-c", "1", "-d", "20ms", "-warmup", "0s", "role:slow")
		b = benchJSON{}
		if err := json.Unmarshal([]byte(r.out), &b); err != nil {
			t.Fatalf("bench of slow calls: exit %d, %q: %v (%s)", r.code, r.out, err, r.err)
		}
		if r.code != 1 || b.Calls == 0 || b.Errors["deadline_exceeded"] != b.Calls || b.Seconds < 0.2 {
			t.Errorf("bench of calls slower than -d: exit %d, %+v; want exit 1, the calls that ended counted (deadline exceeded), the window kept open for them", r.code, b)
		}
		if r := m.run(t, "bench", "-c", "0", "role:echo"); r.code != 2 || !strings.Contains(r.err, "-c 0: want at least one caller") {
			t.Errorf("bench -c 0: exit %d, %s", r.code, r.err)
		}
	})

	t.Run("health", func(t *testing.T) {
		r := m.run(t, "health")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.err)
		}
		golden(t, "health", sortRows(m.mask(r.out), 1))
		r = m.run(t, "health", "--output", "json", "role:echo")
		var hs []healthJSON
		if err := json.Unmarshal([]byte(r.out), &hs); err != nil || len(hs) != 1 || hs[0].ID != "node-b" || hs[0].Status != "serving" {
			t.Errorf("health role:echo: %s (%v); want node-b serving", r.out, err)
		}
	})
}

// TestQUIC: act, members and explain over QUIC.
func TestQUIC(t *testing.T) {
	m := newTestMesh(t, "quic", nil)
	r := m.run(t, "act", "cmd:sum,role:math", "values:[1,2]")
	if r.code != 0 || strings.TrimSpace(r.out) != "{\n  \"sum\": 3\n}" {
		t.Errorf("act over quic: exit %d, %q, %s", r.code, r.out, r.err)
	}
	r = m.run(t, "members", "--output", "json")
	var ms []memberJSON
	if err := json.Unmarshal([]byte(r.out), &ms); err != nil || len(ms) != 4 || ms[1].Transport != "quic" || !ms[1].Connected {
		t.Errorf("members over quic: %s (%v)", r.out, err)
	}
}

// TestBadInput: what cannot join or parse fails within its timeout,
// naming the flag, the input or what was tried.
func TestBadInput(t *testing.T) {
	key := make([]byte, 16)
	m := newTestMesh(t, "tcp", key)
	wrongKey := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	tests := []struct {
		name string
		env  map[string]string
		args []string
		code int
		err  string
	}{
		{"unreachable seeds", nil, []string{"act", "--seeds", "127.0.0.1:1", "--preset", "fast", "--timeout", "1s", "role:x"}, 64 + 14,
			"wizard act: unavailable: no node of the mesh answered within the timeout; tried seeds 127.0.0.1:1 (gossiping from"},
		{"unreachable peers", nil, []string{"members", "--peers", "127.0.0.1:1", "--timeout", "1s"}, 64 + 14,
			"wizard members: unavailable: no node of the mesh answered; tried peers 127.0.0.1:1; nodes known: 127.0.0.1:1 (wizard: tcp: dial 127.0.0.1:1"},
		{"wrong gossip key", nil, []string{"members", "--seeds", m.gossip, "--preset", "fast", "--timeout", "1s", "--gossip-key", wrongKey}, 64 + 14,
			"wizard members: unavailable: no node of the mesh answered within the timeout; tried seeds " + m.gossip},
		{"no gossip key", nil, []string{"members", "--seeds", m.gossip, "--preset", "fast", "--timeout", "1s"}, 64 + 14,
			"wizard members: unavailable: no node of the mesh answered"},
		{"bad key", nil, []string{"members", "--seeds", m.gossip, "--gossip-key", "!!"}, 2, "wizard members: --gossip-key: not base64"},
		{"bad key env", map[string]string{"WIZARD_GOSSIP_KEY": "!!"}, []string{"members", "--seeds", m.gossip}, 2, "wizard members: WIZARD_GOSSIP_KEY: not base64"},
		{"bad timeout env", map[string]string{"WIZARD_TIMEOUT": "soon"}, []string{"members", "--seeds", m.gossip}, 2, `wizard members: WIZARD_TIMEOUT="soon": want a duration`},
		{"bad output", nil, []string{"members", "--output", "xml"}, 2, `wizard members: --output "xml": want text or json`},
		{"bad transport", nil, []string{"members", "--seeds", m.gossip, "--transport", "udp"}, 2, `wizard members: --transport: want tcp or quic, got "udp"`},
		{"no mesh", nil, []string{"members"}, 2, "wizard members: no way to join a mesh: give --seeds, --dns or --peers"},
		{"both", nil, []string{"members", "--seeds", m.gossip, "--peers", "127.0.0.1:1"}, 2, "wizard members: --peers and --seeds: give static peers or gossip seeds, not both"},
		{"bad peer", nil, []string{"members", "--peers", "nowhere"}, 2, `wizard members: --peers: "nowhere" is not host:port`},
		{"unknown command", nil, []string{"summon"}, 2, `wizard: unknown command "summon"`},
		{"unknown flag", nil, []string{"act", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{"missing pattern", nil, []string{"act", "--seeds", m.gossip}, 2, "wizard act: missing PATTERN; see 'wizard help act'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			start := time.Now()
			r := wizard(t, "", tt.args...)
			if r.code != tt.code || !strings.Contains(r.err, tt.err) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d, stderr holding:\n%s", r.code, r.err, tt.code, tt.err)
			}
			if d := time.Since(start); d > 8*time.Second {
				t.Errorf("took %v; the timeout was at most 1s", d)
			}
		})
	}
	// With the key, it joins.
	r := wizard(t, "", "act", "--seeds", m.gossip, "--preset", "fast", "--gossip-key", base64.StdEncoding.EncodeToString(key), "role:echo,n:1")
	if r.code != 0 {
		t.Errorf("with the mesh's key: exit %d: %s", r.code, r.err)
	}
}

// TestHelp: every command has --help with an example; help lists them.
func TestHelp(t *testing.T) {
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			r := wizard(t, "", c.name, "--help")
			if r.code != 0 || !strings.Contains(r.out, "Example:\n  wizard "+c.name) || !strings.Contains(r.out, "usage: wizard "+c.name) {
				t.Errorf("%s --help: exit %d:\n%s", c.name, r.code, r.err)
			}
		})
	}
	r := wizard(t, "", "help")
	for _, c := range commands {
		if !strings.Contains(r.out, "  "+c.name+" ") {
			t.Errorf("help does not list %s:\n%s", c.name, r.out)
		}
	}
}

// sortRows sorts the lines of a table after its first skip lines: rows
// come by address, which differs from run to run.
func sortRows(s string, skip int) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) > skip {
		slices.Sort(lines[skip:])
	}
	return strings.Join(lines, "\n") + "\n"
}
