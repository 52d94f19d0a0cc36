package gateway

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/pattern"
)

// testRoute is a route of testTable: exact path, methods, pattern.
type testRoute struct {
	methods []string
	path    string
	pattern string
	policy  policy
}

// testTable is a small route table for the gateway's own tests, standing
// in for gateway/config's: exact paths, query and JSON body merged into
// the message root, pattern keys refused.
type testTable []testRoute

func (tt testTable) lookup(method, path string) (match, *apiError) {
	var allow []string
	for i := range tt {
		r := &tt[i]
		if r.path != path {
			continue
		}
		if slices.Contains(r.methods, method) {
			return match{policy: &r.policy, pattern: r.pattern, msg: messageFunc(r.message)}, nil
		}
		allow = append(allow, r.methods...)
	}
	if allow != nil {
		e := newAPIError(http.StatusMethodNotAllowed, runtime.CodeUnimplemented, "method "+method+" is not allowed on "+path)
		e.allow = strings.Join(allow, ", ")
		return match{}, e
	}
	return match{}, newAPIError(http.StatusNotFound, runtime.CodeNotFound, "no route for "+method+" "+path)
}

func (r *testRoute) message(q url.Values, body []byte) (any, *apiError) {
	m := map[string]any{}
	if body != nil {
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, badRequest("the body is not a JSON object")
		}
	}
	for k, v := range q {
		m[k] = v[0]
	}
	p := pattern.MustParse(r.pattern)
	for k := range m {
		if _, ok := p.Get(k); ok {
			return nil, badRequest("field " + k + " is the route's and cannot be set")
		}
	}
	return m, nil
}

func route(methods, path, pattern string, p policy) testRoute {
	if p.timeout == 0 {
		p.timeout = 5 * time.Second
	}
	if p.maxTimeout == 0 {
		p.maxTimeout = 10 * time.Second
	}
	p.name = strings.TrimPrefix(path, "/")
	return testRoute{methods: strings.Split(methods, ","), path: path, pattern: pattern, policy: p}
}
