package gateway

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// corsPolicy is the gateway's CORS policy: which origins may call it from
// a browser, with which methods and headers, and whether with credentials.
// No origins: no CORS headers at all (browsers refuse cross-origin calls).
type corsPolicy struct {
	origins     []string // exact origins, or "*"
	methods     []string // default: GET, POST, PUT, PATCH, DELETE
	headers     []string // request headers allowed; default: Authorization, Content-Type, X-Request-Id, X-Request-Timeout-Ms
	expose      []string // response headers exposed; default: X-Request-Id, Retry-After
	credentials bool
	maxAge      time.Duration
}

var (
	defaultCORSMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}
	defaultCORSHeaders = []string{"Authorization", "Content-Type", "X-Request-Id", "X-Request-Timeout-Ms"}
	defaultCORSExpose  = []string{"X-Request-Id", "Retry-After"}
)

// allowed reports whether origin may call the gateway.
func (c *corsPolicy) allowed(origin string) bool {
	return originAllowed(c.origins, origin)
}

// originAllowed reports whether origin is in list (or list holds "*").
func originAllowed(list []string, origin string) bool {
	for _, o := range list {
		if o == "*" || strings.EqualFold(o, origin) {
			return true
		}
	}
	return false
}

// enabled reports whether the policy allows any origin: without one the
// gateway sets no CORS header.
func (c *corsPolicy) enabled() bool { return len(c.origins) > 0 }

// preflight reports whether r is a CORS preflight request.
func preflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

// apply sets the CORS headers of an actual (not preflight) request's
// answer; a request without Origin or from an origin not allowed gets
// none. With a policy every answer says Vary: Origin, those without the
// headers too: a cache must not give one origin's answer to another.
func (c *corsPolicy) apply(h http.Header, origin string) {
	if !c.enabled() {
		return
	}
	h.Add("Vary", "Origin")
	if origin == "" || !c.allowed(origin) {
		return
	}
	c.allowOrigin(h, origin)
	h.Set("Access-Control-Expose-Headers", strings.Join(or(c.expose, defaultCORSExpose), ", "))
}

func (c *corsPolicy) allowOrigin(h http.Header, origin string) {
	if slices.Contains(c.origins, "*") && !c.credentials {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		// With credentials a browser refuses "*": echo the origin.
		h.Set("Access-Control-Allow-Origin", origin)
	}
	if c.credentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
}

// answerPreflight answers a preflight: 204 with the allowed methods and
// headers, or 403 for an origin, method or header the policy refuses.
func (c *corsPolicy) answerPreflight(w http.ResponseWriter, r *http.Request) (status int) {
	origin := r.Header.Get("Origin")
	method := r.Header.Get("Access-Control-Request-Method")
	methods, headers := or(c.methods, defaultCORSMethods), or(c.headers, defaultCORSHeaders)
	if len(c.origins) > 0 {
		w.Header()["Vary"] = append(w.Header()["Vary"], "Origin", "Access-Control-Request-Method", "Access-Control-Request-Headers")
	}
	if !c.allowed(origin) || !containsFold(methods, method) || !headersAllowed(headers, r.Header.Get("Access-Control-Request-Headers")) {
		w.WriteHeader(http.StatusForbidden)
		return http.StatusForbidden
	}
	h := w.Header()
	c.allowOrigin(h, origin)
	h.Set("Access-Control-Allow-Methods", strings.Join(methods, ", "))
	h.Set("Access-Control-Allow-Headers", strings.Join(headers, ", "))
	if c.maxAge > 0 {
		h.Set("Access-Control-Max-Age", strconv.Itoa(int(c.maxAge/time.Second)))
	}
	w.WriteHeader(http.StatusNoContent)
	return http.StatusNoContent
}

// headersAllowed reports whether every header of the comma-separated
// list asked is in allowed.
func headersAllowed(allowed []string, asked string) bool {
	for h := range strings.SplitSeq(asked, ",") {
		if h = strings.TrimSpace(h); h != "" && !containsFold(allowed, h) {
			return false
		}
	}
	return true
}

func containsFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(x string) bool { return strings.EqualFold(x, s) })
}

func or(a, b []string) []string {
	if len(a) > 0 {
		return a
	}
	return b
}
