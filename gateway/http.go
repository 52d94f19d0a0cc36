package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/wizardmesh/wizard/gateway/auth"
	"github.com/wizardmesh/wizard/gateway/internal/jsonscan"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// TimeoutHeader is the request header by which a client asks for a
// shorter (or longer, up to the route's max_timeout) timeout, in
// milliseconds.
const TimeoutHeader = "X-Request-Timeout-Ms"

// access is what the access log says of a request.
type access struct {
	rid     string
	status  int
	route   string
	subject string
	// hdr holds X-Request-Id's value and room for Content-Length's
	// (nil: none, as for a WebSocket request frame).
	hdr *[2]string
}

// serveRoute serves a request for a route: match, rate limit, auth, body,
// the call, the answer.
func (g *Gateway) serveRoute(w http.ResponseWriter, r *http.Request, l *live, a *access) {
	out, e := g.routeRequest(w, r, l, a)
	if e != nil {
		a.status = e.status
		if e.status == StatusClientClosed && r.Context().Err() != nil {
			return // nobody to answer
		}
		writeError(w, e, a.rid)
		return
	}
	a.status = out.statusOr()
	if out.streamed {
		return
	}
	h := w.Header()
	out.setHeaders(h)
	// Canonical keys set directly: Set would canonicalize them again, and
	// the type's slice is shared (net/http only reads it).
	h["Content-Type"] = jsonContentType
	h["Date"] = dateHeader(time.Now()) // net/http's, as it would write it
	if a.hdr != nil {
		a.hdr[1] = strconv.Itoa(len(out.body))
		h["Content-Length"] = a.hdr[1:2:2]
	} else {
		h["Content-Length"] = []string{strconv.Itoa(len(out.body))}
	}
	w.WriteHeader(a.status)
	w.Write(out.body)
}

func (g *Gateway) routeRequest(w http.ResponseWriter, r *http.Request, l *live, a *access) (reply, *apiError) {
	if g.closing.Load() {
		e := newAPIError(http.StatusServiceUnavailable, runtime.CodeUnavailable, "the gateway is shutting down")
		e.retryAfter = retryAfter
		return reply{}, e
	}
	if l.ipLim != nil { // without a limit, no client address to work out
		if e := g.limit(l.ipLim, l.clientIP(r)); e != nil {
			return reply{}, e
		}
	}
	m, e := l.t.lookup(r.Method, r.URL.EscapedPath())
	if e != nil {
		return reply{}, e
	}
	a.route = m.policy.name
	id, e := l.authenticate(r.Context(), m.policy, header(r.Header, "Authorization"))
	if e != nil {
		return reply{}, e
	}
	if id != nil {
		a.subject = id.Subject
	}
	hint, e := timeoutHint(header(r.Header, TimeoutHeader))
	if e != nil {
		return reply{}, e
	}
	body, e := readBody(w, r, &l.set)
	if e != nil {
		return reply{}, e
	}
	var query url.Values // nil without a query: URL.Query makes a map even then
	if r.URL.RawQuery != "" {
		query = r.URL.Query()
	}
	c := call{l: l, m: m, method: r.Method, path: r.URL.Path, query: query, body: body, hint: hint, id: id, rid: a.rid}
	if m.policy.stream != streamNone {
		return g.serveHTTPStream(w, r, c)
	}
	return g.call(r.Context(), c)
}

// header returns the first value of the request header key, which must
// be in canonical form (a constant: TestHeaderKeysCanonical checks
// them): net/http stores a request's keys canonical, and Header.Get
// would canonicalize key again on every request.
func header(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// jsonContentType is the Content-Type value of the gateway's answers,
// shared by every response's header (never modified).
var jsonContentType = []string{"application/json"}

// call is one call into the mesh, from HTTP or a WebSocket frame.
type call struct {
	l            *live // what the request is served by
	m            match
	method, path string
	query        url.Values
	body         []byte // JSON, or nil
	hint         time.Duration
	id           *auth.Identity
	rid          string
}

// call authorizes nothing (the caller has): it rate-limits the subject,
// builds the message, and acts with the route's timeout, clamped hint
// and metadata; a [Response] envelope becomes the reply's status,
// headers and cookies.
func (g *Gateway) call(ctx context.Context, c call) (reply, *apiError) {
	out, e := g.act(ctx, c)
	if e != nil {
		return reply{}, e
	}
	r, err := replyOf(out)
	if err != nil {
		g.log.Error("gateway: a handler's response metadata is refused", "request_id", c.rid, "pattern", c.m.pattern, "err", err)
		return reply{}, newAPIError(http.StatusInternalServerError, runtime.CodeInternal, "internal error")
	}
	return r, nil
}

// act makes the call and returns the handler's answer as JSON.
func (g *Gateway) act(ctx context.Context, c call) (json.RawMessage, *apiError) {
	if c.id != nil {
		if e := g.limit(c.l.subLim, c.id.Subject); e != nil {
			return nil, e
		}
	}
	msg, e := c.message()
	if e != nil {
		return nil, e
	}
	callCtx, cancel := context.WithTimeout(withCallMeta(ctx, c.rid, c.id), c.m.policy.timeoutFor(c.hint))
	defer cancel()
	// Only the route's pattern routes (ActE): a field of the client's
	// body must never steer the call to a narrower pattern
	// (role:users,cmd:delete,admin:true); the handler still sees the
	// pattern's pairs in its message, as Act would give them.
	res, err := g.node.ActE(callCtx, c.m.pattern, msg, noServiceDefault)
	if err != nil {
		e := callError(ctx, callCtx, err, c.method, c.path)
		if e.status >= 500 && e.status != http.StatusServiceUnavailable && e.status != http.StatusGatewayTimeout {
			g.log.Error("gateway: call failed", "request_id", c.rid, "pattern", c.m.pattern, "err", err)
		}
		return nil, e
	}
	b, none, e := g.answerJSON(res, c.rid, c.m.pattern)
	if none {
		return nil, unserved(c.method, c.path)
	}
	return b, e
}

// answerJSON returns a result (a call's answer, a stream's message) as
// JSON; none reports the call's default, noServiceValue.
func (g *Gateway) answerJSON(res runtime.Result, rid, pat string) (b json.RawMessage, none bool, e *apiError) {
	// A remote JSON answer passes on as its text, checked but not
	// decoded (the common case: a handler on another node).
	if b, ok := res.JSON(); ok {
		if !jsonscan.Valid(b) {
			g.log.Error("gateway: a handler's answer is not valid JSON", "request_id", rid, "pattern", pat)
			return nil, false, newAPIError(http.StatusInternalServerError, runtime.CodeInternal, "internal error")
		}
		return json.RawMessage(b), false, nil
	}
	// Decode, not Value: Value would decode a remote answer into maps
	// only to find that it is not the default.
	var out *answer
	if err := res.Decode(&out); err != nil {
		// Most often a protobuf answer of a type this binary does not
		// link: register it (import its Go package; wizard-gateway
		// --descriptors loads a descriptor set).
		g.log.Error("gateway: a handler's result cannot be turned into JSON", "request_id", rid, "pattern", pat, "err", err)
		return nil, false, newAPIError(http.StatusInternalServerError, runtime.CodeInternal, "internal error")
	}
	switch {
	case out == noServiceValue:
		return nil, true, nil
	case out == nil:
		return json.RawMessage("null"), false, nil
	}
	return out.json, false, nil
}

// message builds the call's message: the common request's as JSON, with
// the client's own text of the body, the rest as maps (and the errors of
// what the client may not send).
func (c *call) message() (any, *apiError) {
	// Room for the body and the pattern's pairs at once: the message is
	// written without growing its buffer.
	dst := make([]byte, 0, len(c.body)+2*len(c.m.pattern)+16)
	if b, ok := c.m.msg.appendMessageJSON(dst, c.query, c.body); ok {
		return json.RawMessage(b), nil
	}
	msg, e := c.m.msg.message(c.query, c.body)
	if e != nil {
		return nil, e
	}
	if e := refuseMetaKeys(msg); e != nil {
		return nil, e
	}
	return withPattern(msg, c.m.pattern)
}

// withPattern sets pat's pairs in msg, a message the gateway built
// (the client's fields cannot hold the pattern's keys: the table refuses
// them), so that the handler reads them as with Act.
func withPattern(msg any, pat string) (any, *apiError) {
	p, err := pattern.Parse(pat)
	if err != nil {
		return nil, newAPIError(http.StatusInternalServerError, runtime.CodeInternal, "internal error")
	}
	m, ok := msg.(map[string]any)
	if !ok {
		if msg != nil {
			return msg, nil
		}
		m = make(map[string]any, p.Len())
	}
	for _, pr := range p.Pairs() {
		m[pr.Key] = pr.Value
	}
	return m, nil
}

// refuseMetaKeys refuses a message whose root has a metadata key (one
// ending in '$'): metadata is the gateway's alone.
func refuseMetaKeys(msg any) *apiError {
	m, ok := msg.(map[string]any)
	if !ok {
		return nil
	}
	for k := range m {
		if strings.HasSuffix(k, "$") {
			return badRequest("field " + strconv.Quote(k) + " is reserved: keys ending in '$' are call metadata, set by the gateway only")
		}
	}
	return nil
}

// timeoutFor is the timeout of a call with the client's hint (0: none):
// the route's timeout, or the hint clamped to the route's maximum.
func (p *policy) timeoutFor(hint time.Duration) time.Duration {
	if hint <= 0 {
		return p.timeout
	}
	return min(hint, p.maxTimeout)
}

// timeoutHint parses X-Request-Timeout-Ms.
func timeoutHint(v string) (time.Duration, *apiError) {
	if v == "" {
		return 0, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 {
		return 0, badRequest(TimeoutHeader + " must be a positive number of milliseconds, not " + strconv.Quote(clipString(v, 32)))
	}
	return time.Duration(min(ms, maxHintMs)) * time.Millisecond, nil
}

// maxHintMs bounds a timeout hint before it is clamped to a route's
// max_timeout, so that it cannot overflow a Duration.
const maxHintMs = int64(time.Duration(1<<62) / time.Millisecond)

// readBody reads a JSON body of at most the configured size: 415 for
// another content type, 413 past the size.
func readBody(w http.ResponseWriter, r *http.Request, set *settings) ([]byte, *apiError) {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > 0 { // else chunked: an empty one needs no type
		if e := checkContentType(header(r.Header, "Content-Type")); e != nil {
			return nil, e
		}
	}
	if r.ContentLength > set.maxBody {
		return nil, tooLarge(set.maxBody)
	}
	if r.ContentLength > 0 { // within the limit: read it at once
		body := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			if bodyTimedOut(err) {
				return nil, slowBody(set.readBodyTimeout)
			}
			return nil, badRequest("the request body could not be read")
		}
		return body, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, set.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(set.maxBody)
		}
		if bodyTimedOut(err) {
			return nil, slowBody(set.readBodyTimeout)
		}
		return nil, badRequest("the request body could not be read")
	}
	if len(body) == 0 {
		return nil, nil
	}
	if r.ContentLength < 0 {
		if e := checkContentType(header(r.Header, "Content-Type")); e != nil {
			return nil, e
		}
	}
	return body, nil
}

func tooLarge(limit int64) *apiError {
	return newAPIError(http.StatusRequestEntityTooLarge, runtime.CodeInvalidArgument, "the request body is larger than "+strconv.FormatInt(limit, 10)+" bytes")
}

// checkContentType accepts application/json (any parameters) and
// +json types.
func checkContentType(ct string) *apiError {
	// The common case without the parser (which allocates its map of
	// parameters): media types are case-insensitive.
	if strings.EqualFold(ct, "application/json") {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return nil
	}
	e := newAPIError(http.StatusUnsupportedMediaType, runtime.CodeInvalidArgument, "the request body must be JSON (Content-Type: application/json), not "+strconv.Quote(clipString(ct, 64)))
	return e
}

// authenticate verifies the request's bearer token as the route asks:
// required (401 without one), optional (a token given must be valid), or
// none (any token is ignored); then the route's scopes (403).
func (l *live) authenticate(ctx context.Context, p *policy, header string) (*auth.Identity, *apiError) {
	if p.auth == authNone {
		return nil, nil
	}
	token, e := bearer(header)
	if e != nil {
		return nil, e
	}
	var id *auth.Identity
	if token != "" {
		if id, e = l.verify(ctx, token); e != nil {
			return nil, e
		}
	}
	return id, authorize(p, id)
}

func (l *live) verify(ctx context.Context, token string) (*auth.Identity, *apiError) {
	if l.auth == nil {
		return nil, authError(auth.ErrRejected)
	}
	return l.auth.verify(ctx, token)
}

// verifyOnce is verify for a WebSocket connection's token, which the
// connection verifies once and keeps the identity of: a caching verifier
// keeps its cache for the tokens that come again, HTTP requests'.
func (l *live) verifyOnce(ctx context.Context, token string) (*auth.Identity, *apiError) {
	if l.auth == nil {
		return nil, authError(auth.ErrRejected)
	}
	return l.auth.verifyOnce(ctx, token)
}

// authorize checks an identity (nil: none) against a route's auth and
// scopes.
func authorize(p *policy, id *auth.Identity) *apiError {
	switch {
	case p.auth == authNone:
		return nil
	case id == nil && p.auth == authRequired:
		return authError(auth.ErrMissingToken)
	}
	// Optional without a token passes unless the route needs scopes
	// (then it is a 401, as auth.RequireScopes says).
	if err := auth.RequireScopes(id, p.scopes); err != nil {
		return authError(err)
	}
	return nil
}

// bearer returns the token of an Authorization header ("" for none).
func bearer(h string) (string, *apiError) {
	if h == "" {
		return "", nil
	}
	token, err := auth.BearerToken(h)
	if err != nil {
		if errors.Is(err, auth.ErrMissingToken) {
			err = auth.ErrMalformed // a header of another scheme
		}
		return "", authError(err)
	}
	return token, nil
}

// limit takes a token of key's bucket in l, or is a 429.
func (g *Gateway) limit(l *limiter, key string) *apiError {
	ok, wait := l.allow(key)
	if ok {
		return nil
	}
	e := newAPIError(http.StatusTooManyRequests, runtime.CodeResourceExhausted, "rate limited: too many requests")
	e.retryAfter = retrySeconds(wait)
	e.retryMs = max(1, wait.Milliseconds())
	e.limited = true
	return e
}

// writeError writes e as the JSON error body.
func writeError(w http.ResponseWriter, e *apiError, rid string) {
	h := w.Header()
	e.setHeaders(h)
	h.Set("Content-Type", "application/json")
	body := appendErrorJSON(make([]byte, 0, 128), e, rid)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.status)
	w.Write(body)
}

// clipString cuts s to at most n bytes for an error message.
func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
