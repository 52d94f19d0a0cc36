package config

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// validator checks a decoded Config, applies its defaults and compiles
// its routes, adding every problem to ps.
type validator struct {
	c     *Config
	ps    *problems
	where map[string]pos // the decoder's positions of values
}

// add adds a problem at fallback, or for a list item ("mesh.seeds[2]")
// at the item's own position.
func (v *validator) add(fallback pos, where, format string, args ...any) {
	if strings.HasSuffix(where, "]") {
		if p, ok := v.where[where]; ok && p.line > 0 {
			fallback = p
		}
	}
	v.ps.add(fallback, where, format, args...)
}

func validate(c *Config, ps *problems, where map[string]pos) {
	v := &validator{c, ps, where}
	v.server(&c.Server)
	v.mesh(&c.Mesh)
	v.defaults(&c.Defaults)
	v.auth(&c.Auth)
	v.cors(&c.CORS)
	v.rateLimits(&c.RateLimits)
	v.accessLog(&c.AccessLog)
	v.routes()
	v.conflicts()
	v.corsMethods(&c.CORS)
	v.websocket(c.WebSocket)
	v.writeTimeout(&c.Server)
	if len(ps.list) == 0 {
		c.table = newTable(c.Routes)
	}
}

// positive applies def to a duration the file did not give, and refuses
// a given zero.
func (v *validator) positive(n *node, where, key string, d *time.Duration, def time.Duration) {
	if !n.has(key) {
		*d = def
		return
	}
	if *d <= 0 {
		v.add(n.at(key), join(where, key), "must be positive")
	}
}

func (v *validator) routes() {
	if len(v.c.Routes) == 0 {
		v.add(v.c.at("routes"), "routes", "no routes; the gateway needs at least one")
		return
	}
	names := make(map[string]*Route)
	for i, r := range v.c.Routes {
		where := "routes[" + strconv.Itoa(i) + "]"
		if r == nil {
			if !slices.ContainsFunc(v.ps.list, func(p *Problem) bool { return p.Where == where }) {
				v.add(v.c.at("routes"), where, "empty route")
			}
			continue
		}
		if r.broken {
			continue
		}
		v.route(r, where)
		if !r.has("name") {
			continue // a default name repeats only with a conflict
		}
		if first := names[r.Name]; first != nil {
			v.add(r.at("name"), join(where, "name"), "route name %s is taken by the route at line %d", strconv.Quote(r.Name), first.start.line)
			continue
		}
		names[r.Name] = r
	}
}

func (v *validator) route(r *Route, where string) {
	v.methods(r, where)
	if !r.given("path") {
		v.add(r.start, where, "path is required")
	} else if !r.has("path") {
	} else if t, err := parsePath(r.Path); err != nil {
		v.add(r.at("path"), join(where, "path"), "%v", err)
	} else {
		r.path = t
	}
	if !r.given("pattern") {
		v.add(r.start, where, "pattern is required")
	} else if !r.has("pattern") {
	} else if t, err := parsePattern(r.Pattern); err != nil {
		v.add(r.at("pattern"), join(where, "pattern"), "%v", err)
	} else {
		r.pat = t
	}
	if !r.given("name") && len(r.Methods) > 0 {
		r.Name = r.Methods[0] + " " + r.Path
	} else if r.has("name") && strings.TrimSpace(r.Name) == "" {
		v.add(r.at("name"), join(where, "name"), "empty name")
	}
	v.routeAuth(r, where)
	v.routeStream(r, where)
	v.routeEvents(r, where)
	d := &v.c.Defaults
	def := d.Timeout
	if r.Stream != "" {
		def = 0 // a stream lasts until either side ends it, unless bounded
	}
	v.positive(&r.node, where, "timeout", &r.Timeout, def)
	v.positive(&r.node, where, "max_timeout", &r.MaxTimeout, d.MaxTimeout)
	if r.Timeout > r.MaxTimeout && r.MaxTimeout > 0 {
		from := ""
		if !r.has("max_timeout") {
			from = " (defaults.max_timeout)"
		}
		v.add(r.at("timeout"), join(where, "timeout"), "%v is longer than max_timeout %v%s", r.Timeout, r.MaxTimeout, from)
	}
	if r.path != nil {
		v.vars(r, where)
	}
	if r.path != nil && r.pat != nil {
		v.patternVars(r, where)
		v.bodyField(r, where)
	}
}

// routeStream checks a route's stream kind: one of the three, and a
// client or bidi stream only with the WebSocket endpoint that serves it.
func (v *validator) routeStream(r *Route, where string) {
	if !r.has("stream") {
		return
	}
	w := join(where, "stream")
	switch {
	case !validStream(r.Stream):
		v.add(r.at("stream"), w, "want server, client or bidi, got %s", strconv.Quote(string(r.Stream)))
	case r.Stream != StreamServer && v.c.WebSocket == nil:
		v.add(r.at("stream"), w, "%s streams are served over the WebSocket only: the file needs a websocket section", r.Stream)
	}
}

func (v *validator) methods(r *Route, where string) {
	if len(r.Methods) == 0 {
		if !r.bad["method"] {
			v.add(r.at("method"), where, "method is required (one, or a list)")
		}
		return
	}
	for i, m := range r.Methods {
		w := join(where, "method")
		if len(r.Methods) > 1 {
			w += "[" + strconv.Itoa(i) + "]"
		}
		switch {
		case !isToken(m):
			v.add(r.at("method"), w, "bad method %s", strconv.Quote(m))
		case strings.ToUpper(m) != m:
			v.add(r.at("method"), w, "method %s: methods are upper-case (%s)", strconv.Quote(m), strings.ToUpper(m))
		case slices.Index(r.Methods, m) < i:
			v.add(r.at("method"), w, "method %s is listed twice", m)
		}
	}
}

// isToken reports whether s is an HTTP token (RFC 9110).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func (v *validator) routeAuth(r *Route, where string) {
	if !r.has("auth") {
		r.Auth = v.c.Defaults.Auth
	} else if !validAuth(r.Auth) {
		v.add(r.at("auth"), join(where, "auth"), "want required, optional or none, got %s", strconv.Quote(string(r.Auth)))
		return
	}
	if r.has("auth") && r.Auth.needsAuth() && !v.c.hasAuth() {
		v.add(r.at("auth"), join(where, "auth"), "%s needs an auth section (auth.jwt or auth.delegate)", r.Auth)
	}
	for i, s := range r.Scopes {
		if !isScope(s) {
			v.add(r.at("scopes"), join(where, "scopes")+"["+strconv.Itoa(i)+"]", "bad scope %s: a scope is printable ASCII without spaces, '\"' or '\\' (RFC 6749)", strconv.Quote(s))
		}
	}
	if len(r.Scopes) > 0 && r.Auth == AuthNone {
		v.add(r.at("scopes"), join(where, "scopes"), "scopes need auth required or optional, not none")
	}
}

// isScope reports whether s is an OAuth scope-token (RFC 6749 section
// 3.3): a token's scopes are split at white space, so a scope holding
// any, or a control character, could never be granted.
func isScope(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func validAuth(m AuthMode) bool {
	return m == AuthRequired || m == AuthOptional || m == AuthNone
}

// vars checks the route's vars entries and gives each path variable its
// constraint.
func (v *validator) vars(r *Route, where string) {
	r.cons = make([]*Var, len(r.path.vars))
	names := make([]string, 0, len(r.Vars))
	for name := range r.Vars {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		c := r.Vars[name]
		w := join(join(where, "vars"), name)
		i := r.path.varIndex(name)
		if i < 0 {
			v.add(c.start, w, "{%s} is not a variable of the path %s", name, r.Path)
			continue
		}
		if v.constraint(&c, w) {
			r.Vars[name] = c
			r.cons[i] = &c
		}
	}
}

// constraint checks one vars entry and compiles it; false when it is
// wrong.
func (v *validator) constraint(c *Var, where string) bool {
	ok := true
	switch {
	case c.has("allow") && c.has("regex"):
		v.add(c.at("regex"), where, "allow and regex exclude each other; give one")
		return false
	case !c.has("allow") && !c.has("regex"):
		v.add(c.start, where, `give allow (a list, or "*" for any value) or regex`)
		return false
	case c.has("regex"):
		if _, err := regexp.Compile(c.Regex); err != nil {
			v.add(c.at("regex"), join(where, "regex"), "bad regex %s: %v", strconv.Quote(c.Regex), strings.TrimPrefix(err.Error(), "error parsing regexp: "))
			return false
		}
		c.re = regexp.MustCompile(`^(?:` + c.Regex + `)$`)
	case c.AllowsAny():
	default:
		if len(c.Allow) == 0 {
			v.add(c.at("allow"), join(where, "allow"), `empty list; give values, or "*" for any value`)
			return false
		}
		c.set = make(map[string]struct{}, len(c.Allow))
		for i, a := range c.Allow {
			w := join(where, "allow") + "[" + strconv.Itoa(i) + "]"
			switch _, dup := c.set[a]; {
			case a == "":
				v.add(c.at("allow"), w, "empty value; a variable is never empty")
				ok = false
			case a == "*":
				v.add(c.at("allow"), w, `"*" among other values; write allow: "*" alone for any value`)
				ok = false
			case dup:
				v.add(c.at("allow"), w, "%s is listed twice", strconv.Quote(a))
				ok = false
			}
			c.set[a] = struct{}{}
		}
	}
	return ok
}

// patternVars maps the pattern's variables to the path's and checks
// that each is constrained.
func (v *validator) patternVars(r *Route, where string) {
	r.patVars = make([]int, len(r.pat.vars))
	for j, name := range r.pat.vars {
		i := r.path.varIndex(name)
		if i < 0 {
			v.add(r.at("pattern"), join(where, "pattern"), "{%s} is not a variable of the path %s", name, r.Path)
			continue
		}
		r.patVars[j] = i
		if _, given := r.Vars[name]; !given {
			v.add(r.at("pattern"), join(where, "pattern"), `{%s} fills the pattern: give vars.%s an allow list, a regex, or allow: "*"`, name, name)
		}
	}
}

func (v *validator) bodyField(r *Route, where string) {
	if !r.has("body") {
		return
	}
	w := join(where, "body")
	switch {
	case r.Body == "":
		v.add(r.at("body"), w, "empty field name")
	case strings.HasSuffix(r.Body, "$"):
		v.add(r.at("body"), w, "field %s ends in '$': such keys are wizard's metadata", strconv.Quote(r.Body))
	case r.path.varIndex(r.Body) >= 0:
		v.add(r.at("body"), w, "field %s is a path variable", strconv.Quote(r.Body))
	case slices.ContainsFunc(r.pat.pairs, func(p patternPair) bool { return p.key == r.Body }):
		v.add(r.at("body"), w, "field %s is a key of the pattern", strconv.Quote(r.Body))
	}
}

// routeEvents parses a route's events: each a pattern template of
// identity values, none twice, served over the WebSocket only, and one
// that reads the identity only on a route that verifies it.
func (v *validator) routeEvents(r *Route, where string) {
	if !r.has("events") {
		return
	}
	w := join(where, "events")
	if v.c.WebSocket == nil {
		v.add(r.at("events"), w, "route %s: events are pushed over the WebSocket only: the file needs a websocket section", strconv.Quote(r.Name))
	}
	if len(r.Events) == 0 {
		v.add(r.at("events"), w, "route %s: empty list; give the event patterns clients may subscribe to", strconv.Quote(r.Name))
	}
	seen := make(map[string]bool, len(r.Events))
	for i, src := range r.Events {
		wi := w + "[" + strconv.Itoa(i) + "]"
		e, err := parseEvent(src)
		if err != nil {
			v.add(r.at("events"), wi, "route %s: %v", strconv.Quote(r.Name), err)
			continue
		}
		canon := canonicalTemplate(e.t)
		switch {
		case seen[canon]:
			v.add(r.at("events"), wi, "route %s: %s is listed twice", strconv.Quote(r.Name), strconv.Quote(src))
			continue
		case e.UsesIdentity() && r.Auth == AuthNone:
			v.add(r.at("events"), wi, "route %s: %s fills values from the verified identity: the route needs auth required or optional, not none", strconv.Quote(r.Name), strconv.Quote(src))
			continue
		}
		seen[canon] = true
		r.events = append(r.events, e)
	}
}

// canonicalTemplate writes t with its pairs sorted, for comparing
// templates.
func canonicalTemplate(t *patternTemplate) string {
	var b strings.Builder
	for _, pp := range t.pairs {
		b.WriteString(pp.key + ":" + strings.Join(pp.lits, "\x00") + ";")
		for _, x := range pp.vars {
			b.WriteString(t.vars[x] + ";")
		}
	}
	return b.String()
}
