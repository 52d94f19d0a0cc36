package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseProblems checks each problem a file can have: its position,
// setting and exact reason, every problem of a file at once, in order.
func TestParseProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want []string
	}{
		{
			name: "unknown key",
			src: `routes:
  - method: GET
    path: /a
    pattrn: role:a
`,
			want: []string{
				"gateway.yaml:2:5: routes[0]: pattern is required",
				"gateway.yaml:4:5: routes[0]: unknown key \"pattrn\"; did you mean \"pattern\"?",
			},
		},
		{
			name: "unknown top key",
			src: `rutes: []
`,
			want: []string{
				"gateway.yaml:1:1: unknown key \"rutes\"; did you mean \"routes\"?",
				"gateway.yaml:1:1: routes: no routes; the gateway needs at least one",
			},
		},
		{
			name: "unknown key far",
			src: `server:
  listn: ":80"
  foo: 1
routes:
  - {method: GET, path: /a, pattern: "role:a"}
`,
			want: []string{
				"gateway.yaml:2:3: server: unknown key \"listn\"; did you mean \"listen\"?",
				"gateway.yaml:3:3: server: unknown key \"foo\"; known keys: idle_timeout, listen, max_body, max_header_bytes, read_body_timeout, read_header_timeout, shutdown_grace, tls, trusted_proxies, write_timeout",
			},
		},
		{
			name: "type errors",
			src: `server:
  listen: [a]
  max_body: big
  idle_timeout: 5
  read_header_timeout: -1s
websocket:
  send_queue: many
access_log:
  enabled: yes please
routes:
  - {method: GET, path: /a, pattern: "role:a"}
`,
			want: []string{
				"gateway.yaml:2:11: server.listen: want a string, got a list",
				"gateway.yaml:3:13: server.max_body: want a size like 1MiB, 64KiB or 512B, got \"big\"",
				"gateway.yaml:4:17: server.idle_timeout: want a duration like 2s or 500ms, got \"5\"",
				"gateway.yaml:5:24: server.read_header_timeout: negative duration -1s",
				"gateway.yaml:7:15: websocket.send_queue: want an integer, got \"many\"",
				"gateway.yaml:9:12: access_log.enabled: want true or false, got \"yes please\"",
			},
		},
		{
			name: "syntax",
			src: `routes:
  - method: GET
   path: /a
`,
			want: []string{
				"gateway.yaml:3:4: value is not allowed in this context",
			},
		},
		{
			name: "second document",
			src: `routes: []
---
routes: []
`,
			want: []string{
				"gateway.yaml:3:1: a second YAML document; the file holds one",
			},
		},
		{
			name: "empty file",
			src:  ``,
			want: []string{
				"gateway.yaml: routes: no routes; the gateway needs at least one",
			},
		},
		{
			name: "no routes",
			src: `server: {listen: ":80"}
`,
			want: []string{
				"gateway.yaml:1:1: routes: no routes; the gateway needs at least one",
			},
		},
		{
			name: "required",
			src: `routes:
  - name: x
`,
			want: []string{
				"gateway.yaml:2:5: routes[0]: method is required (one, or a list)",
				"gateway.yaml:2:5: routes[0]: path is required",
				"gateway.yaml:2:5: routes[0]: pattern is required",
			},
		},
		{
			name: "route not mapping",
			src: `routes:
  - /a
`,
			want: []string{
				"gateway.yaml:2:5: routes[0]: want a mapping, got a string",
			},
		},
		{
			name: "bad path",
			src: `routes:
  - {method: GET, path: "/a/{x", pattern: "role:a"}
  - {method: GET, path: "a", pattern: "role:a"}
  - {method: GET, path: "/a//b", pattern: "role:a"}
  - {method: GET, path: "/a/", pattern: "role:a"}
  - {method: GET, path: "/a/{x}{y}", pattern: "role:a"}
  - {method: GET, path: "/a/{x}/{x}", pattern: "role:a"}
  - {method: GET, path: "/a/{1x}", pattern: "role:a"}
  - {method: GET, path: "/a b", pattern: "role:a"}
  - {method: GET, path: "/a/%20", pattern: "role:a"}
  - {method: GET, path: "/a/..", pattern: "role:a"}
  - {method: GET, path: "/a}", pattern: "role:a"}
  - {method: GET, path: "/a/{}", pattern: "role:a"}
`,
			want: []string{
				"gateway.yaml:2:25: routes[0].path: bad path template \"/a/{x\" at offset 3: '{' without '}'",
				"gateway.yaml:3:25: routes[1].path: bad path template \"a\" at offset 0: a path starts with '/'",
				"gateway.yaml:4:25: routes[2].path: bad path template \"/a//b\" at offset 3: empty segment",
				"gateway.yaml:5:25: routes[3].path: bad path template \"/a/\" at offset 2: trailing '/'; routes take none (a request's trailing '/' never matches)",
				"gateway.yaml:6:25: routes[4].path: bad path template \"/a/{x}{y}\" at offset 6: variables {x} and {y} touch; put literal text between them",
				"gateway.yaml:7:25: routes[5].path: bad path template \"/a/{x}/{x}\" at offset 7: variable {x} appears twice",
				"gateway.yaml:8:25: routes[6].path: bad path template \"/a/{1x}\" at offset 4: bad variable name \"1x\": a letter or '_', then letters, digits or '_'",
				"gateway.yaml:9:25: routes[7].path: bad path template \"/a b\" at offset 2: ' ' cannot appear in a path template (write the character itself, not its escape)",
				"gateway.yaml:10:25: routes[8].path: bad path template \"/a/%20\" at offset 3: '%' cannot appear in a path template (write the character itself, not its escape)",
				"gateway.yaml:11:25: routes[9].path: bad path template \"/a/..\" at offset 3: \"..\" segment; requests holding one are refused",
				"gateway.yaml:12:25: routes[10].path: bad path template \"/a}\" at offset 2: '}' without '{'",
				"gateway.yaml:13:25: routes[11].path: bad path template \"/a/{}\" at offset 3: empty variable name",
			},
		},
		{
			name: "bad pattern",
			src: `routes:
  - {method: GET, path: "/a/{x}", pattern: "role:a,cmd:{x", vars: {x: {allow: "*"}}}
  - {method: GET, path: "/b/{x}", pattern: "role:a,{x}:b", vars: {x: {allow: "*"}}}
  - {method: GET, path: "/c", pattern: "role"}
  - {method: GET, path: "/d", pattern: "role:a,role:b"}
  - {method: GET, path: "/e", pattern: "a$:1"}
  - {method: GET, path: "/f/{x}", pattern: "role:a,cmd:x}"}
  - {method: GET, path: "/g/{x}", pattern: 'role:{x},cmd:"{x}', vars: {x: {allow: "*"}}}
`,
			want: []string{
				"gateway.yaml:2:44: routes[0].pattern: bad pattern template \"role:a,cmd:{x\" at offset 11: '{' without '}'",
				"gateway.yaml:3:44: routes[1].pattern: bad pattern template \"role:a,{x}:b\" at offset 7: a variable in key \"{x}\"; variables fill values only",
				"gateway.yaml:4:40: routes[2].pattern: bad pattern template \"role\" at offset 4: missing ':' after key \"role\"",
				"gateway.yaml:5:40: routes[3].pattern: bad pattern template \"role:a,role:b\" at offset 7: duplicate key \"role\"",
				"gateway.yaml:6:40: routes[4].pattern: bad pattern template \"a$:1\" at offset 0: no key routes (keys ending in '$' and null values are dropped)",
				"gateway.yaml:7:44: routes[5].pattern: bad pattern template \"role:a,cmd:x}\" at offset 12: '}' without '{'",
				"gateway.yaml:8:44: routes[6].pattern: bad pattern template \"role:{x},cmd:\\\"{x}\" at offset 13: unterminated quoted value",
			},
		},
		{
			name: "pattern variable not in path",
			src: `routes:
  - {method: GET, path: "/a/{x}", pattern: "role:a,cmd:{y}", vars: {x: {allow: [a]}}}
`,
			want: []string{
				"gateway.yaml:2:44: routes[0].pattern: {y} is not a variable of the path /a/{x}",
			},
		},
		{
			name: "unconstrained",
			src: `routes:
  - {method: GET, path: "/a/{x}", pattern: "role:a,cmd:{x}"}
`,
			want: []string{
				"gateway.yaml:2:44: routes[0].pattern: {x} fills the pattern: give vars.x an allow list, a regex, or allow: \"*\"",
			},
		},
		{
			name: "vars",
			src: `routes:
  - method: GET
    path: /a/{x}/{y}/{z}/{w}
    pattern: "role:a,x:{x},y:{y},z:{z},w:{w}"
    vars:
      x: {regex: "[a-"}
      y: {allow: [a, a, ""]}
      z: {}
      w: {allow: [], regex: a}
      v: {allow: "*"}
`,
			want: []string{
				"gateway.yaml:6:18: routes[0].vars.x.regex: bad regex \"[a-\": missing closing ]: `[a-`",
				"gateway.yaml:7:22: routes[0].vars.y.allow[1]: \"a\" is listed twice",
				"gateway.yaml:7:25: routes[0].vars.y.allow[2]: empty value; a variable is never empty",
				"gateway.yaml:8:7: routes[0].vars.z: give allow (a list, or \"*\" for any value) or regex",
				"gateway.yaml:9:29: routes[0].vars.w: allow and regex exclude each other; give one",
				"gateway.yaml:10:7: routes[0].vars.v: {v} is not a variable of the path /a/{x}/{y}/{z}/{w}",
			},
		},
		{
			name: "duplicate names",
			src: `routes:
  - {name: a, method: GET, path: "/a", pattern: "role:a"}
  - {name: a, method: GET, path: "/b", pattern: "role:b"}
`,
			want: []string{
				"gateway.yaml:3:12: routes[1].name: route name \"a\" is taken by the route at line 2",
			},
		},
		{
			name: "timeouts",
			src: `defaults: {timeout: 20s}
routes:
  - {method: GET, path: "/a", pattern: "role:a", timeout: 5s, max_timeout: 2s}
  - {method: GET, path: "/b", pattern: "role:b", timeout: 0s}
`,
			want: []string{
				"gateway.yaml:1:21: defaults.timeout: 20s is longer than max_timeout 10s",
				"gateway.yaml:3:59: routes[0].timeout: 5s is longer than max_timeout 2s",
				"gateway.yaml:4:59: routes[1].timeout: must be positive",
			},
		},
		{
			name: "stream",
			src: `routes:
  - {method: GET, path: "/a", pattern: "role:a", stream: server}
  - {method: GET, path: "/b", pattern: "role:b", stream: up}
  - {method: GET, path: "/c", pattern: "role:c", stream: bidi}
  - {method: GET, path: "/d", pattern: "role:d", stream: [server]}
`,
			want: []string{
				"gateway.yaml:3:58: routes[1].stream: want server, client or bidi, got \"up\"",
				"gateway.yaml:4:58: routes[2].stream: bidi streams are served over the WebSocket only: the file needs a websocket section",
				"gateway.yaml:5:58: routes[3].stream: want a string, got a list",
			},
		},
		{
			name: "stream timeouts",
			src: `server: {write_timeout: 3s}
routes:
  - {method: GET, path: "/a", pattern: "role:a", stream: server, timeout: 1h, max_timeout: 2h}
  - {method: GET, path: "/b", pattern: "role:b", max_timeout: 2s}
`,
			want: nil,
		},
		{
			name: "methods",
			src: `routes:
  - {method: [GET, get, "G T", GET], path: "/a", pattern: "role:a"}
`,
			want: []string{
				"gateway.yaml:2:20: routes[0].method[1]: method \"get\": methods are upper-case (GET)",
				"gateway.yaml:2:25: routes[0].method[2]: bad method \"G T\"",
				"gateway.yaml:2:32: routes[0].method[3]: method GET is listed twice",
			},
		},
		{
			name: "conflict same",
			src: `routes:
  - {name: a, method: GET, path: "/a/{x}", pattern: "role:a"}
  - {method: [POST, GET], path: "/a/{y}", pattern: "role:b"}
`,
			want: []string{
				"gateway.yaml:3:33: routes[1].path: GET /a/{y} and route \"a\" (line 2), GET /a/{x}, match the same paths",
			},
		},
		{
			name: "conflict crossing",
			src: `routes:
  - {name: a, method: GET, path: "/a/{x}", pattern: "role:a"}
  - {name: b, method: GET, path: "/{y}/b", pattern: "role:b"}
`,
			want: []string{
				"gateway.yaml:3:34: routes[1].path: GET /{y}/b conflicts with route \"a\" (line 2), GET /a/{x}: both match /a/b, and neither is more specific (segment 2 is more specific in /{y}/b, segment 1 in /a/{x})",
			},
		},
		{
			name: "conflict shapes",
			src: `routes:
  - {name: a, method: GET, path: "/f/{a}-{b}", pattern: "role:a"}
  - {name: b, method: GET, path: "/f/{x}.json", pattern: "role:b"}
`,
			want: []string{
				"gateway.yaml:3:34: routes[1].path: GET /f/{x}.json conflicts with route \"a\" (line 2), GET /f/{a}-{b}: both match /f/xx-x.json, and neither is more specific (segments {x}.json and {a}-{b} overlap)",
			},
		},
		{
			name: "no conflict",
			src: `routes:
  - {name: a, method: GET, path: "/a/{x}", pattern: "role:a"}
  - {name: b, method: POST, path: "/{y}/b", pattern: "role:b"}
  - {name: c, method: GET, path: "/a/b", pattern: "role:c"}
  - {name: d, method: GET, path: "/{x}/{y}", pattern: "role:d"}
  - {name: e, method: GET, path: "/f/{x}.json", pattern: "role:e"}
  - {name: f, method: GET, path: "/f/{x}.xml", pattern: "role:e"}
`,
		},
		{
			name: "auth",
			src: `routes:
  - {method: GET, path: "/a", pattern: "role:a", auth: required}
  - {method: GET, path: "/b", pattern: "role:b", auth: maybe}
  - {method: GET, path: "/c", pattern: "role:c", scopes: [read]}
`,
			want: []string{
				"gateway.yaml:2:56: routes[0].auth: required needs an auth section (auth.jwt or auth.delegate)",
				"gateway.yaml:3:56: routes[1].auth: want required, optional or none, got \"maybe\"",
				"gateway.yaml:4:58: routes[2].scopes: scopes need auth required or optional, not none",
			},
		},
		{
			name: "auth jwt",
			src: `auth:
  jwt: {keys: [a.pem], jwks_url: "http://id.example.com/jwks", algorithms: [none, RS256, HS256, XX1, RS256]}
  delegate: {pattern: "role:auth,cmd:*"}
routes:
  - {method: GET, path: "/a", pattern: "role:a"}
`,
			want: []string{
				"gateway.yaml:2:34: auth.jwt: keys and jwks_url exclude each other; give one",
				"gateway.yaml:2:76: auth.jwt.algorithms: HS and public-key algorithms mixed: a public key could then be used as an HMAC secret; give one kind",
				"gateway.yaml:2:76: auth.jwt.algorithms: HS algorithms need secrets from keys files, not a JWKS",
				"gateway.yaml:2:77: auth.jwt.algorithms[0]: \"none\" is never allowed: tokens must be signed",
				"gateway.yaml:2:97: auth.jwt.algorithms[3]: unknown algorithm \"XX1\"; known: HS256, HS384, HS512, RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA",
				"gateway.yaml:2:102: auth.jwt.algorithms[4]: RS256 is listed twice",
				"gateway.yaml:3:13: auth: jwt and delegate exclude each other; give one",
				"gateway.yaml:3:23: auth.delegate.pattern: want a pattern of fixed values, got \"role:auth,cmd:*\"",
			},
		},
		{
			name: "token caches",
			src: `auth:
  jwt:
    keys: [k.pem]
    algorithms: [ES256]
    cache: {entries: 0, bytes: 0B, max_ttl: 1m, off: true}
routes:
  - {method: GET, path: "/a", pattern: "role:a"}
`,
			want: []string{
				"gateway.yaml:5:22: auth.jwt.cache.entries: 0: must be positive (to verify every token in full, set off: true)",
				"gateway.yaml:5:32: auth.jwt.cache.bytes: must be positive (to verify every token in full, set off: true)",
				"gateway.yaml:5:45: auth.jwt.cache.max_ttl: max_ttl applies to auth.delegate.cache only: a JWT is cached until its exp, and its key's removal from the JWKS ends it at the next refresh",
				"gateway.yaml:5:54: auth.jwt.cache.off: off with entries or bytes: give one",
			},
		},
		{
			name: "delegate cache",
			src: `auth:
  delegate:
    pattern: "role:auth,cmd:verify"
    cache: {entries: 5, bytes: 2048GiB, max_ttl: 0s, off: true, size: 1}
routes:
  - {method: GET, path: "/a", pattern: "role:a"}
`,
			want: []string{
				"gateway.yaml:4:32: auth.delegate.cache.bytes: 2048GiB is more than 1TiB",
				"gateway.yaml:4:50: auth.delegate.cache.max_ttl: must be positive",
				"gateway.yaml:4:59: auth.delegate.cache.off: off applies to auth.jwt.cache only: a delegate's answers are always cached; bound how long with max_ttl",
				"gateway.yaml:4:65: auth.delegate.cache: unknown key \"size\"; known keys: bytes, entries, max_ttl, off",
			},
		},
		{
			name: "jwt empty",
			src: `auth:
  jwt: {}
routes:
  - {method: GET, path: "/a", pattern: "role:a"}
`,
			want: []string{
				"gateway.yaml:2:8: auth.jwt: give keys (PEM files) or jwks_url",
				"gateway.yaml:2:8: auth.jwt: algorithms is required: the allow-list of signing algorithms, e.g. [RS256]",
			},
		},
		{
			name: "server mesh",
			src: `server:
  listen: "localhost:80"
  max_body: 0B
  tls: {cert_file: a.crt, server_name: gw}
  write_timeout: 1s
mesh:
  transport: udp
  seeds: ["a:1", "b:x", ":7946"]
  peers: ["p"]
  gossip_key: "c2hvcnQ="
  gossip_key_file: k
  tls: {cert_file: a, key_file: b}
routes:
  - {method: GET, path: "/a", pattern: "role:a"}
`,
			want: []string{
				"gateway.yaml:3:13: server.max_body: must be positive",
				"gateway.yaml:4:8: server.tls: key_file is required",
				"gateway.yaml:4:40: server.tls: server_name applies to mesh.tls only (the name the mesh's peers are verified against)",
				"gateway.yaml:5:18: server.write_timeout: 1s is shorter than the max_timeout 10s of the route at line 14: its replies would be cut",
				"gateway.yaml:7:14: mesh.transport: want tcp or quic, got \"udp\"",
				"gateway.yaml:8:18: mesh.seeds[1]: \"b:x\": bad port \"x\"",
				"gateway.yaml:8:25: mesh.seeds[2]: \":7946\": no host",
				"gateway.yaml:9:11: mesh.peers[0]: \"p\": want host:port",
				"gateway.yaml:11:20: mesh: gossip_key and gossip_key_file exclude each other; give one",
				"gateway.yaml:12:8: mesh.tls: ca_file is required (the CA of the mesh's certificates)",
			},
		},
		{
			name: "gossip advertise",
			src: `mesh: {gossip_advertise: pod-ip}
routes:
  - {method: GET, path: "/a", pattern: "role:a"}
`,
			want: []string{
				`gateway.yaml:1:26: mesh.gossip_advertise: "pod-ip": want an IP address, or ip:port`,
			},
		},
		{
			name: "cors websocket",
			src: `cors: {origins: ["*", "https://a.example.com/x"], credentials: true, headers: ["X Y"]}
websocket: {path: "/api/{x}", ping_interval: 1m}
rate_limits: {per_ip: {rate: 100}, per_subject: {burst: 1}}
access_log: {format: xml}
routes:
  - {method: GET, path: "/a", pattern: "role:a"}
`,
			want: []string{
				"gateway.yaml:1:18: cors.origins[0]: \"*\" among other origins; give \"*\" alone",
				"gateway.yaml:1:23: cors.origins[1]: \"https://a.example.com/x\" is not an origin (scheme://host[:port], no path)",
				"gateway.yaml:1:64: cors.credentials: credentials with origin \"*\": browsers refuse it; list the origins",
				"gateway.yaml:1:80: cors.headers[0]: bad header name \"X Y\"",
				"gateway.yaml:2:19: websocket.path: \"/api/{x}\": want a literal path like /ws",
				"gateway.yaml:3:30: rate_limits.per_ip.rate: want a rate like 100/s or 6000/m, got \"100\"",
				"gateway.yaml:3:49: rate_limits.per_subject: rate is required (like 100/s)",
				"gateway.yaml:3:49: rate_limits.per_subject: needs an auth section: subjects come from verified tokens",
				"gateway.yaml:4:22: access_log.format: want json or text, got \"xml\"",
			},
		},
		{
			name: "websocket path taken",
			src: `websocket: {path: /api/ws}
routes:
  - {method: GET, path: "/api/{x}", pattern: "role:a"}
`,
			want: []string{
				"gateway.yaml:1:19: websocket.path: /api/ws is matched by the route at line 3; the WebSocket endpoint needs a path of its own",
			},
		},
		{
			name: "body",
			src: `routes:
  - {method: POST, path: "/a/{x}", pattern: "role:a,cmd:b", body: x}
  - {method: POST, path: "/b", pattern: "role:a,cmd:b", body: cmd}
  - {method: POST, path: "/c", pattern: "role:a,cmd:b", body: "m$"}
`,
			want: []string{
				"gateway.yaml:2:67: routes[0].body: field \"x\" is a path variable",
				"gateway.yaml:3:63: routes[1].body: field \"cmd\" is a key of the pattern",
				"gateway.yaml:4:63: routes[2].body: field \"m$\" ends in '$': such keys are wizard's metadata",
			},
		},
		{
			name: "alias",
			src: `base: &b {method: GET}
routes:
  - {<<: *b, path: /a, pattern: "role:a"}
  - *nope
`,
			want: []string{
				"gateway.yaml:1:1: unknown key \"base\"; known keys: access_log, auth, cors, defaults, mesh, rate_limits, routes, server, websocket",
				"gateway.yaml:4:5: routes[1]: alias \"*nope\" names no anchor before it",
			},
		},
		{
			name: "conflict literal start",
			src: `routes:
  - {name: e, method: GET, path: "/f/{x}.json", pattern: "role:e"}
  - {name: g, method: GET, path: "/f/v{x}", pattern: "role:g"}
`,
			want: []string{
				"gateway.yaml:3:34: routes[1].path: GET /f/v{x} conflicts with route \"e\" (line 2), GET /f/{x}.json: both match /f/vx.json, and neither is more specific (segments v{x} and {x}.json overlap)",
			},
		},
		{
			name: "anchors in x- keys",
			src: `x-base: &b {method: GET, auth: none}
routes:
  - {<<: *b, path: /a, pattern: "role:a"}
  - {<<: *b, path: /b, pattern: "role:b", auth: optional}
`,
			want: []string{
				"gateway.yaml:4:49: routes[1].auth: optional needs an auth section (auth.jwt or auth.delegate)",
			},
		},
		{
			name: "more vars",
			src: `routes:
  - method: GET
    path: /a/{x}/{y}
    pattern: "role:a,x:{x}"
    vars:
      x: {allow: [a, "*"]}
      y: {alow: [b]}
`,
			want: []string{
				"gateway.yaml:6:22: routes[0].vars.x.allow[1]: \"*\" among other values; write allow: \"*\" alone for any value",
				"gateway.yaml:7:7: routes[0].vars.y: give allow (a list, or \"*\" for any value) or regex",
				"gateway.yaml:7:11: routes[0].vars.y: unknown key \"alow\"; did you mean \"allow\"?",
			},
		},
		{
			name: "duplicate yaml key",
			src: `routes:
  - method: GET
    method: POST
    path: /a
    pattern: role:a
`,
			want: []string{
				"gateway.yaml:3:5: mapping key \"method\" already defined at [2:5]",
			},
		},
		{
			name: "bad merge",
			src: `routes:
  - {<<: [1], method: GET, path: /a, pattern: "role:a"}
`,
			want: []string{
				"gateway.yaml:2:10: routes[0]: a merge key (<<) takes a mapping or a list of mappings",
			},
		},
		{
			name: "defaults auth without section",
			src: `defaults: {auth: required}
routes:
  - {method: GET, path: /a, pattern: "role:a"}
`,
			want: []string{
				"gateway.yaml:1:18: defaults.auth: required needs an auth section (auth.jwt or auth.delegate)",
			},
		},
		{
			name: "empty name",
			src: `routes:
  - {name: "", method: GET, path: /a, pattern: "role:a"}
`,
			want: []string{
				"gateway.yaml:2:12: routes[0].name: empty name",
			},
		},
		{
			name: "scalars for lists and strings",
			src: `routes:
  - {name: 5, method: GET, path: /a, pattern: "role:a", scopes: read, vars: 3}
`,
			want: []string{
				"gateway.yaml:2:65: routes[0].scopes: scopes need auth required or optional, not none",
				"gateway.yaml:2:77: routes[0].vars: want a mapping, got a number",
			},
		},
		{
			name: "null values are not given",
			src: `server:
routes:
  - method: GET
    path: /a
    pattern: "role:a"
    timeout:
`,
		},
		{
			name: "empty key",
			src: `"": 1
routes:
  - {method: GET, path: /a, pattern: "role:a", "": x}
`,
			want: []string{
				"gateway.yaml:1:1: unknown key \"\"; known keys: access_log, auth, cors, defaults, mesh, rate_limits, routes, server, websocket",
				"gateway.yaml:3:48: routes[0]: unknown key \"\"; known keys: auth, body, events, max_timeout, method, name, path, pattern, scopes, stream, timeout, vars",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("gateway.yaml", []byte(tc.src))
			var got []string
			if err != nil {
				got = strings.Split(err.Error(), "\n")
				if c != nil {
					t.Error("a Config with the problems")
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
