package gateway

import (
	"net/url"
	"time"
)

// What the gateway needs of a route table, apart from how it is written
// (gateway/config builds it from YAML): a match for a request's method
// and path, its policy, and the pattern and message it builds.

// authMode is a route's auth: required, optional or none.
type authMode uint8

const (
	authRequired authMode = iota
	authOptional
	authNone
)

// policy is what a route asks of the gateway for its calls.
type policy struct {
	name       string
	auth       authMode
	scopes     []string
	timeout    time.Duration // a stream's: 0, none
	maxTimeout time.Duration
	stream     streamKind // streamNone: the route makes calls
	// bodyUnder, if set, puts the JSON body under this field instead of
	// merging it into the message root (the message's own concern; kept
	// here for the access log only).
}

// match is a route a request's method and path matched.
type match struct {
	policy  *policy
	pattern string // the pattern with the path's variables filled in
	// message builds the call's message from the query and the JSON body
	// (nil without one); its errors are the client's (400).
	message func(query url.Values, body []byte) (any, *apiError)
	// messageJSON, when not nil, writes the common request's message as
	// JSON, the pattern's pairs included, or reports false: message
	// then builds it or says what is wrong.
	messageJSON func(query url.Values, body []byte) ([]byte, bool)
}

// table is a route table: lookup takes the request's escaped path (the
// table splits it at '/' before decoding, so that %2F stays inside its
// segment) and fails with a 404 naming method and path, a 405 with
// Allow, a 404 for a value outside a variable's allow list, or a 400 for
// a malformed path.
type table interface {
	lookup(method, path string) (match, *apiError)
}
