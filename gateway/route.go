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
	// msg builds the call's message. An interface of a pointer-shaped
	// value, not closures: a request allocates nothing for it.
	msg messageBuilder
}

// messageBuilder builds a matched request's message.
type messageBuilder interface {
	// message builds the call's message from the query and the JSON body
	// (nil without one); its errors are the client's (400).
	message(query url.Values, body []byte) (any, *apiError)
	// appendMessageJSON appends the common request's message as JSON to
	// dst, the pattern's pairs included, or reports false: message then
	// builds it or says what is wrong.
	appendMessageJSON(dst []byte, query url.Values, body []byte) ([]byte, bool)
}

// messageFunc is a messageBuilder of message alone (it writes no JSON).
type messageFunc func(query url.Values, body []byte) (any, *apiError)

func (f messageFunc) message(q url.Values, body []byte) (any, *apiError) { return f(q, body) }

func (messageFunc) appendMessageJSON(dst []byte, _ url.Values, _ []byte) ([]byte, bool) {
	return dst, false
}

// table is a route table: lookup takes the request's escaped path (the
// table splits it at '/' before decoding, so that %2F stays inside its
// segment) and fails with a 404 naming method and path, a 405 with
// Allow, a 404 for a value outside a variable's allow list, or a 400 for
// a malformed path.
type table interface {
	lookup(method, path string) (match, *apiError)
}
