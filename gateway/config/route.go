package config

import (
	"regexp"
	"slices"
	"time"
)

// Route is one entry of the file's routes: methods and a path template
// that map to a pattern template. After [Parse], every field holds its
// effective value (defaults applied).
type Route struct {
	// Name names the route in errors and logs; by default the first
	// method and the path ("POST /api/users/{action}"). Names are unique.
	Name string `yaml:"name"`
	// Methods are the HTTP methods the route answers, upper-case (the
	// key is "method": one method or a list). Required.
	Methods []string `yaml:"method"`
	// Path is the path template: segments of literal text and {name}
	// variables anywhere in a segment ("/api/{kind}-items/{id}.json").
	// Required.
	Path string `yaml:"path"`
	// Pattern is the pattern template the call is routed by: a wizard
	// pattern whose values may hold the path's variables anywhere
	// ("role:users,cmd:{action}", "cmd:{action}_v2"). Required.
	Pattern string `yaml:"pattern"`
	// Vars constrains the path's variables by name; every variable that
	// fills the pattern needs an entry.
	Vars map[string]Var `yaml:"vars"`
	// Auth is the route's authentication: [AuthRequired],
	// [AuthOptional] or [AuthNone]; by default [Defaults.Auth].
	Auth AuthMode `yaml:"auth"`
	// Scopes are the scopes a caller's token must all hold.
	Scopes []string `yaml:"scopes"`
	// Timeout bounds a call when the client gives no hint; by default
	// [Defaults.Timeout]. On a streaming route it bounds the whole
	// stream, and is 0 (none) by default: a stream lasts until either
	// side ends it or the client leaves.
	Timeout time.Duration `yaml:"timeout"`
	// MaxTimeout is the most a client's hint (X-Request-Timeout-Ms, a
	// frame's timeout_ms) may ask for; by default [Defaults.MaxTimeout].
	MaxTimeout time.Duration `yaml:"max_timeout"`
	// Body, when set, puts the request's JSON body (any JSON value)
	// under this one field of the message instead of merging its fields
	// into the message root.
	Body string `yaml:"body"`
	// Stream, when set, makes the route open a stream of its pattern
	// instead of a call: [StreamServer], [StreamClient] or [StreamBidi].
	// Client and bidi streams are served over the WebSocket only.
	Stream StreamKind `yaml:"stream"`
	// Events are the event patterns a WebSocket client that passes the
	// route's auth and scopes may subscribe to, each a pattern whose
	// values may hold {auth.subject} and {auth.claims.NAME}, filled from
	// the connection's verified identity ("role:match,event:found,
	// user:{auth.subject}"). A client's subscription holds every pair of
	// an entry as filled: it may be narrower, never wider.
	Events []string `yaml:"events"`

	node
	path   *pathTemplate
	pat    *patternTemplate
	events []*EventTemplate
	// patVars maps the pattern's variables to the path's.
	patVars []int
	// cons holds the constraint of each path variable (nil: any value).
	cons []*Var
}

// Var constrains the values of a path variable: Allow lists them, or
// Regex describes them; the file's allow: "*" (or a list of "*" alone)
// allows any value and shows that this is meant.
type Var struct {
	// Allow lists the values the variable may take ("*": any).
	Allow []string `yaml:"allow"`
	// Regex is a regular expression (RE2 syntax) the whole value must
	// match: it is anchored at both ends.
	Regex string `yaml:"regex"`

	node
	set map[string]struct{}
	re  *regexp.Regexp
}

// AllowsAny reports whether v allows any value (allow: "*").
func (v *Var) AllowsAny() bool { return len(v.Allow) == 1 && v.Allow[0] == "*" }

// allows reports whether value passes the constraint.
func (v *Var) allows(value string) bool {
	switch {
	case v.re != nil:
		return v.re.MatchString(value)
	case v.set != nil:
		_, ok := v.set[value]
		return ok
	}
	return true
}

// AuthMode says whether a route needs a verified identity.
type AuthMode string

// The authentication modes of a route.
const (
	// AuthRequired refuses a request without a valid token (401).
	AuthRequired AuthMode = "required"
	// AuthOptional verifies a token when there is one and lets the
	// request through without.
	AuthOptional AuthMode = "optional"
	// AuthNone ignores tokens.
	AuthNone AuthMode = "none"
)

// needsAuth reports whether m verifies tokens.
func (m AuthMode) needsAuth() bool { return m == AuthRequired || m == AuthOptional }

// StreamKind says which way a streaming route's messages flow.
type StreamKind string

// The kinds of stream a route may open.
const (
	// StreamServer sends the request's message, then relays the
	// service's messages to the client: over HTTP as Server-Sent
	// Events or newline-delimited JSON, over the WebSocket as msg
	// frames.
	StreamServer StreamKind = "server"
	// StreamClient relays the client's msg frames to the service, then
	// its one answer (WebSocket only).
	StreamClient StreamKind = "client"
	// StreamBidi relays messages both ways at once (WebSocket only).
	StreamBidi StreamKind = "bidi"
)

// validStream reports whether k is a kind of stream.
func validStream(k StreamKind) bool {
	return k == StreamServer || k == StreamClient || k == StreamBidi
}

// EventTemplates returns the route's events, parsed.
func (r *Route) EventTemplates() []*EventTemplate { return slices.Clone(r.events) }
