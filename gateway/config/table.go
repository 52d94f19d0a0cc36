package config

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Table is the compiled route table of a [Config]: it matches a request's
// method and path to a route. A Table is immutable and safe for
// concurrent use; a reload builds a new one to swap in.
type Table struct {
	routes  []*Route
	methods []string          // every method, in the order of the file
	trees   map[string]*tnode // per method
}

// tnode is a node of a method's tree: one level per path segment.
type tnode struct {
	lits   map[string]*tnode // literal segments
	shaped []tedge           // segments with variables; a bare variable last
	route  *Route            // the route whose path ends here
}

// tedge leads to a child through a segment with variables.
type tedge struct {
	seg  *segment
	next *tnode
}

// newTable builds the table of compiled routes. Conflicts were refused
// before: a method's tree has at most one route per leaf.
func newTable(routes []*Route) *Table {
	t := &Table{routes: routes, trees: make(map[string]*tnode)}
	for _, r := range routes {
		for _, m := range r.Methods {
			root := t.trees[m]
			if root == nil {
				root = &tnode{}
				t.trees[m] = root
				t.methods = append(t.methods, m)
			}
			n := root
			for i := range r.path.segs {
				n = n.child(&r.path.segs[i])
			}
			if n.route == nil {
				n.route = r
			}
		}
	}
	return t
}

// child returns (adding it if needed) the child through seg.
func (n *tnode) child(seg *segment) *tnode {
	if seg.literal() {
		if c := n.lits[seg.lits[0]]; c != nil {
			return c
		}
		if n.lits == nil {
			n.lits = make(map[string]*tnode)
		}
		c := &tnode{}
		n.lits[seg.lits[0]] = c
		return c
	}
	for _, e := range n.shaped {
		if slices.Equal(e.seg.lits, seg.lits) {
			return e.next
		}
	}
	c := &tnode{}
	n.shaped = append(n.shaped, tedge{seg, c})
	// A bare variable matches what any other shape does: it goes last.
	slices.SortStableFunc(n.shaped, func(a, b tedge) int {
		switch {
		case a.seg.bare() == b.seg.bare():
			return 0
		case a.seg.bare():
			return 1
		}
		return -1
	})
	return c
}

// Routes returns the routes, in the order of the file.
func (t *Table) Routes() []*Route { return slices.Clone(t.routes) }

// Match finds the route for a request. path is the request's escaped
// path (net/http's r.URL.EscapedPath()): it is split at '/' first and
// each segment percent-decoded after, so "%2F" in a variable's place
// gives a '/' inside the value and never a new segment.
//
// Among the routes of the method whose templates match, the most
// specific wins (see the package doc's # Precedence); the values of its
// variables must then pass the route's constraints, or the answer is a
// 404 naming the variable (a less specific route is not tried).
//
// Errors are [*RequestError]: 404 when no route matches (naming the
// method and path), 405 when routes of other methods do (with Allow),
// 400 for a malformed path (a bad escape, an escape that is not UTF-8,
// a "." or ".." segment, a raw space, control character, '?' or '#').
// A WebSocket frame's path is taken the same way: escaped, without its
// query.
func (t *Table) Match(method, path string) (*Match, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	var room [8]string
	if root := t.trees[method]; root != nil {
		if r, vals := root.find(path, start(path), room[:0]); r != nil {
			for i, c := range r.cons {
				if c != nil && !c.allows(vals[i]) {
					name := r.path.vars[i]
					return nil, notFound("no route for "+method+" "+clip(path)+": "+strconv.Quote(clip(vals[i]))+" is not an allowed value of {"+name+"}", name)
				}
			}
			m := &Match{Route: r, Pattern: r.pat.fill(vals, r.patVars)}
			m.vals = append(m.room[:0], vals...)
			return m, nil
		}
	}
	var allow []string
	for _, other := range t.methods {
		if other == method {
			continue
		}
		if r, _ := t.trees[other].find(path, start(path), room[:0]); r != nil {
			allow = append(allow, other)
		}
	}
	if len(allow) > 0 {
		slices.Sort(allow)
		return nil, notAllowed("method "+clip(method)+" is not allowed for "+clip(path)+"; allowed: "+strings.Join(allow, ", "), allow)
	}
	msg := "no route for " + clip(method) + " " + clip(path)
	if len(path) > 1 && strings.HasSuffix(path, "/") {
		if _, err := t.Match(method, strings.TrimSuffix(path, "/")); err == nil {
			msg += " (routes take no trailing '/')"
		}
	}
	return nil, notFound(msg, "")
}

// start is where the walk of path begins: the end for "/" (no
// segments), else its first '/'.
func start(path string) int {
	if path == "/" {
		return 1
	}
	return 0
}

// find walks path from at (a '/' before a segment, or len(path) at the
// end), trying at each level the literal child, then the segments with
// variables (a bare variable last), and backtracking on failure. It
// returns the route and the values of its variables, appended to vals.
func (n *tnode) find(path string, at int, vals []string) (*Route, []string) {
	if at == len(path) {
		return n.route, vals
	}
	end := strings.IndexByte(path[at+1:], '/')
	if end < 0 {
		end = len(path)
	} else {
		end += at + 1
	}
	seg := path[at+1 : end]
	if strings.IndexByte(seg, '%') >= 0 {
		seg, _ = url.PathUnescape(seg) // checkPath made sure it decodes
	}
	if c := n.lits[seg]; c != nil {
		if r, v := c.find(path, end, vals); r != nil {
			return r, v
		}
	}
	for _, e := range n.shaped {
		if v, ok := matchSegment(e.seg, seg, vals); ok {
			if r, v := e.next.find(path, end, v); r != nil {
				return r, v
			}
		}
	}
	return nil, vals
}

// checkPath refuses what no route should see: a path not starting with
// '/', a raw byte an escaped path never holds (a space, a control
// character, '?' or '#': the query belongs apart), a bad percent-escape,
// escapes that decode to invalid UTF-8, and "." or ".." segments
// (written plainly or escaped).
func checkPath(path string) error {
	if path == "" || path[0] != '/' {
		return notFound("no route for path "+strconv.Quote(clip(path))+": a path starts with '/'", "")
	}
	escaped, dot, high := false, false, false
	for i := 0; i < len(path); i++ {
		switch c := path[i]; {
		case c == '%':
			escaped = true
		case c == '.':
			dot = true
		case c >= utf8.RuneSelf:
			high = true
		case c <= ' ' || c == 0x7f || c == '?' || c == '#':
			return badRequest("path "+strconv.Quote(clip(path))+" holds "+strconv.QuoteRune(rune(c))+"; escape it (a query goes apart from the path)", "")
		}
	}
	if !escaped && !dot && !high {
		return nil
	}
	for seg := range strings.SplitSeq(path[1:], "/") {
		if escaped && strings.IndexByte(seg, '%') >= 0 {
			d, err := url.PathUnescape(seg)
			if err != nil {
				return badRequest("bad percent-escape in path "+clip(path), "")
			}
			seg = d
		}
		if !utf8.ValidString(seg) {
			return badRequest("path "+strconv.Quote(clip(path))+" is not valid UTF-8", "")
		}
		if seg == "." || seg == ".." {
			return badRequest("path "+clip(path)+" holds a "+strconv.Quote(seg)+" segment", "")
		}
	}
	return nil
}

// maxEcho is how much of a client's method, path or value a message
// repeats.
const maxEcho = 200

// clip cuts s to maxEcho bytes (at a character boundary) with "…".
func clip(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	i := maxEcho
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
