// Package config reads the gateway's YAML file and compiles its route
// table: method and path templates mapped to pattern templates, matched
// against requests, and the messages built from them.
//
// [Parse] and [Load] decode strictly: an unknown key (with the nearest
// known one suggested), a value of the wrong type and every rule below
// are a [*Problem] naming the file, line, column, setting and reason, as
// FILE:LINE:COL: WHERE: REASON. All problems of a file are returned at
// once (the first 100), one per line, in the order of the file. [Check]
// is what `wizard-gateway check-config FILE` runs and prints.
//
// # Files
//
// One YAML document of at most [MaxFileSize] bytes. Anchors, aliases and
// merge keys (<<) work; top-level keys starting with "x-" are ignored, a
// place for anchors. A key with no value ("timeout:") counts as not
// given. Sizes take a unit (512B, 64KiB, 1MiB; kB, MB, GB are powers of
// 1000), durations are Go's (500ms, 2s, 1m), rates COUNT/UNIT (100/s,
// 6000/m). The package reads no file the configuration names (PEM keys,
// gossip keys): it checks their names, the gateway reads them.
//
// # Templates
//
// A path template is "/" and segments of literal text and variables,
// {name}, anywhere in a segment: "/api/users/{action}",
// "/api/{kind}-items/{id}.json". Two variables cannot touch ("{a}{b}").
// A variable matches one segment's text, never empty and never across a
// '/'; a variable followed by literal text ends at the first occurrence
// of that text after its first byte, the last one takes the rest of the
// segment before the segment's literal end ("{name}.{ext}" splits
// "a.tar.gz" as "a" and "tar.gz"; "{id}.json" reads "a.b.json" as
// "a.b").
//
// A pattern template is a wizard pattern whose values may hold the
// path's variables anywhere: "role:users,cmd:{action}",
// "cmd:{action}_v2". Variables fill values only, never keys: a client
// never chooses which keys route its call. Every variable that fills
// the pattern needs a constraint in vars: an allow list, a regex (RE2,
// anchored at both ends) or an explicit allow: "*". A filled value is
// quoted in the pattern when needed, so a value holding ',' or ':' or
// "null" stays one value.
//
// # Matching
//
// [Table.Match] takes the request's escaped path. It splits it at '/'
// first and percent-decodes each segment after: "%2F" inside a
// variable's segment is a '/' in the value and never makes a new
// segment. Literal text compares against the decoded segment. A bad
// escape, an escape that decodes to invalid UTF-8 and a "." or ".."
// segment (plain or escaped) are 400s. Trailing slashes are not
// redirected: "/api/users/" is not "/api/users" (404, saying that
// routes take no trailing '/'); templates cannot end in '/'. Methods
// match exactly (a GET route does not answer HEAD).
//
// # Precedence
//
// Two routes that share a method and can match the same path must have
// one more specific than the other, segment by segment: a literal
// segment is more specific than one with variables, and a segment with
// literal text around its variable ("{id}.json") is more specific than a
// bare variable ("{id}"). The more specific route wins. Segments whose
// literal starts or ends cannot agree ("{x}.json" and "{x}.xml", "v{n}"
// and "w{n}") never overlap. Any other overlap ("/a/{x}" and "/{y}/b",
// or "{a}-{b}" and "{x}.json" in the same place) is a conflict refused at
// load, with both routes' lines, as net/http's
// ServeMux explains its conflicts. Constraints do not take part: the
// most specific template wins and its constraints decide, so a value
// outside allow is a 404 naming the variable even when a less specific
// route would match.
//
// # Messages
//
// [Match.Message] merges the path variables, the query and the JSON body
// into the message root (or puts the body under one field with the
// route's body option). A client field named like a pattern key, a path
// variable, the body field or a '$' metadata key is a 400 naming it.
//
// # Streams
//
// A route with stream: server, client or bidi opens a stream of its
// pattern instead of making a call (see the gateway package doc for how
// clients use them). Client and bidi streams need the websocket
// section: they are served over the WebSocket only. A streaming route's
// timeout, when given, bounds the whole stream; by default it has none.
//
// # Errors
//
// Match and Message return [*RequestError], carrying the HTTP status
// (400, 404, 405 with the Allow list) and the wizard code of the error
// body.
//
// # Defaults
//
// A file with one route works: server.listen ":8080",
// read_header_timeout 5s, read_body_timeout 30s, idle_timeout 2m,
// write_timeout the longest max_timeout of the routes that do not stream
// plus 5s, max_body 1MiB, max_header_bytes 64KiB,
// shutdown_grace 10s, trusted_proxies none (X-Forwarded-For ignored);
// mesh.transport tcp on ":0", gossip on "0.0.0.0:7946"; defaults.timeout 2s, max_timeout 10s, auth required
// when the file has an auth section and none when it has not; delegate
// timeout 500ms; JWKS refresh 5m; token cache (auth.jwt.cache,
// auth.delegate.cache) 10000 entries, 16MiB, a delegate's answers until
// their expires_at; CORS methods those of the routes,
// headers Authorization, Content-Type, X-Request-Id,
// X-Request-Timeout-Ms, max_age 10m; the WebSocket endpoint off unless
// the file has a websocket section, then at /ws with origins from cors,
// max_message 64KiB, max_inflight_per_conn 64, max_streams_per_conn 16,
// send_queue 256,
// ping_interval 30s, idle_timeout 2m; a rate limit's burst its rate's
// count; the access log on, json, to stderr. A route's name defaults to
// its first method and path ("GET /hello"); method, path and pattern are
// required.
package config
