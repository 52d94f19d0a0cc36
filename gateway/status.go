package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/wizardmesh/wizard/runtime"
)

// StatusClientClosed is the status the gateway logs for a request whose
// client went away before the answer (nginx's 499): nothing is sent.
const StatusClientClosed = 499

// retryAfter is the Retry-After, in seconds, of the 503s of the mesh
// (nobody serves the pattern, overloaded, breakers open).
const retryAfter = 1

// apiError is one row of the status table: what the client is told.
type apiError struct {
	status     int
	code       runtime.Code
	message    string
	details    any    // the body's error.details, if any
	retryAfter int    // seconds; 0: no Retry-After
	retryMs    int64  // a WebSocket frame's retry_after_ms; 0: retryAfter's
	allow      string // 405's Allow
	challenge  string // 401's WWW-Authenticate
	limited    bool   // a rate limit's 429 (not the in-flight limit's)
}

func (e *apiError) Error() string { return e.message }

func newAPIError(status int, code runtime.Code, msg string) *apiError {
	return &apiError{status: status, code: code, message: msg}
}

// badRequest is a 400 invalid_argument.
func badRequest(msg string) *apiError {
	return newAPIError(http.StatusBadRequest, runtime.CodeInvalidArgument, msg)
}

// codeStatus is the status of a handler's error code (DESIGN §8).
var codeStatus = [...]int{
	runtime.CodeOK:                 http.StatusOK,
	runtime.CodeCanceled:           StatusClientClosed,
	runtime.CodeUnknown:            http.StatusInternalServerError,
	runtime.CodeInvalidArgument:    http.StatusBadRequest,
	runtime.CodeDeadlineExceeded:   http.StatusGatewayTimeout,
	runtime.CodeNotFound:           http.StatusNotFound,
	runtime.CodeAlreadyExists:      http.StatusConflict,
	runtime.CodePermissionDenied:   http.StatusForbidden,
	runtime.CodeResourceExhausted:  http.StatusServiceUnavailable,
	runtime.CodeFailedPrecondition: http.StatusBadRequest,
	runtime.CodeAborted:            http.StatusConflict,
	runtime.CodeOutOfRange:         http.StatusBadRequest,
	runtime.CodeUnimplemented:      http.StatusNotImplemented,
	runtime.CodeInternal:           http.StatusInternalServerError,
	runtime.CodeUnavailable:        http.StatusServiceUnavailable,
	runtime.CodeDataLoss:           http.StatusInternalServerError,
	runtime.CodeUnauthenticated:    http.StatusUnauthorized,
}

// StatusOf returns the HTTP status the gateway answers a handler's error
// code with: invalid_argument, failed_precondition and out_of_range 400,
// unauthenticated 401, permission_denied 403, not_found 404,
// already_exists and aborted 409, canceled 499, unimplemented 501,
// unavailable and resource_exhausted 503, deadline_exceeded 504, and
// internal, unknown, data_loss and any other code 500.
func StatusOf(c runtime.Code) int {
	if int(c) < len(codeStatus) {
		return codeStatus[c]
	}
	return http.StatusInternalServerError
}

// answer is a call's result as JSON: what [runtime.Result.Decode] makes of
// a handler's answer (null decodes to a nil *answer), or noServiceValue.
type answer struct{ json json.RawMessage }

// UnmarshalJSON keeps the answer's JSON.
func (a *answer) UnmarshalJSON(b []byte) error {
	a.json = bytes.Clone(b)
	return nil
}

// noServiceValue is the value a call's runtime.Default answers with when
// no node serves its pattern: the gateway tells it apart from a handler's
// own not_found by identity, never by a message (Decode into a *answer
// hands it over as it is).
var noServiceValue = &answer{}

// noServiceDefault is the call option of noServiceValue, made once: a
// call option in an interface is allocated where it is made.
var noServiceDefault = runtime.Default(noServiceValue)

// unserved is the 503 of a route whose pattern no node serves.
func unserved(method, path string) *apiError {
	e := newAPIError(http.StatusServiceUnavailable, runtime.CodeUnavailable, "no service is available for "+method+" "+path)
	e.retryAfter = retryAfter
	return e
}

// callError is the row of the status table for a call's error. client is
// the request's own context (its end is the client gone), call the call's
// (its deadline the route's timeout).
func callError(client, call context.Context, err error, method, path string) *apiError {
	if client.Err() != nil {
		return newAPIError(StatusClientClosed, runtime.CodeCanceled, "the client closed the request")
	}
	if errors.Is(call.Err(), context.DeadlineExceeded) {
		return newAPIError(http.StatusGatewayTimeout, runtime.CodeDeadlineExceeded, "no answer within the request's timeout")
	}
	var re *runtime.Error
	if !errors.As(err, &re) {
		return newAPIError(http.StatusInternalServerError, runtime.CodeInternal, "internal error")
	}
	status := StatusOf(re.Code)
	switch {
	case errors.Is(err, runtime.ErrNoHandler): // the peers it went to had no handler for it any more
		return unserved(method, path)
	case status == http.StatusInternalServerError:
		return newAPIError(status, re.Code, "internal error")
	}
	e := newAPIError(status, re.Code, re.Message)
	switch re.Code {
	case runtime.CodeUnavailable, runtime.CodeResourceExhausted:
		e.retryAfter = retryAfter
		if strings.HasPrefix(re.Message, "wizard:") {
			// The mesh's own words name peers and their addresses.
			e.message = "the service for " + method + " " + path + " is overloaded or unavailable"
		}
	case runtime.CodeDeadlineExceeded:
		if strings.HasPrefix(re.Message, "wizard:") {
			e.message = "no answer within the request's timeout"
		}
	}
	return e
}

// setHeaders sets the headers of e's row on h.
func (e *apiError) setHeaders(h http.Header) {
	if e.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	if e.allow != "" {
		h.Set("Allow", e.allow)
	}
	if e.challenge != "" {
		h.Set("WWW-Authenticate", e.challenge)
	}
}

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }
