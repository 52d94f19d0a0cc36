package config

import (
	"net/http"
	"strings"

	"github.com/wizardmesh/wizard/runtime"
)

// RequestError is what [Table.Match] and [Match.Message] return for a
// request the table cannot serve: an HTTP status, the wizard code the
// gateway puts in its error body, and a message that names what is wrong
// (the method and path, the variable or the field). Its messages repeat
// only what the client sent and the route's names, never internals.
type RequestError struct {
	// Status is the HTTP status: 400, 404 or 405.
	Status int
	// Code is the error code of the JSON error body:
	// [runtime.CodeInvalidArgument] for 400, [runtime.CodeNotFound] for
	// 404 and [runtime.CodeUnimplemented] for 405.
	Code runtime.Code
	// Message is the text of the error body.
	Message string
	// Allow lists the methods the path has routes for, for a 405's Allow
	// header (sorted); empty otherwise.
	Allow []string
	// Field names the variable (404) or message field (400) at fault,
	// when there is one.
	Field string
}

// Error returns the message with the package's prefix.
func (e *RequestError) Error() string { return "wizard: gateway: " + e.Message }

// AllowHeader returns the Allow header's value, the methods joined by
// ", ".
func (e *RequestError) AllowHeader() string { return strings.Join(e.Allow, ", ") }

func notFound(msg, field string) *RequestError {
	return &RequestError{Status: http.StatusNotFound, Code: runtime.CodeNotFound, Message: msg, Field: field}
}

func badRequest(msg, field string) *RequestError {
	return &RequestError{Status: http.StatusBadRequest, Code: runtime.CodeInvalidArgument, Message: msg, Field: field}
}

func notAllowed(msg string, allow []string) *RequestError {
	return &RequestError{Status: http.StatusMethodNotAllowed, Code: runtime.CodeUnimplemented, Message: msg, Allow: allow}
}
