package auth

import (
	"errors"
	"net/http"
	"strings"

	"github.com/wizardmesh/wizard/runtime"
)

// Reason says why a verification failed. Each reason has a sentinel error
// ([ErrExpired], ...) that errors.Is matches against any [*Error] with the
// same reason.
type Reason uint8

// The reasons. Those before [ReasonScope] are 401, [ReasonScope] is 403 and
// [ReasonUnavailable] is 503.
const (
	ReasonMissing     Reason = iota + 1 // no bearer token
	ReasonMalformed                     // not a well-formed token
	ReasonAlgorithm                     // algorithm not allowed (none included) or not its key's
	ReasonUnknownKey                    // no key with the token's kid
	ReasonSignature                     // the signature does not verify
	ReasonExpired                       // exp has passed
	ReasonNotYetValid                   // nbf or iat in the future
	ReasonIssuer                        // iss missing or not the configured one
	ReasonAudience                      // aud missing or without the configured one
	ReasonClaims                        // a required claim (exp) missing or of the wrong type
	ReasonRejected                      // the auth pattern refused the token
	ReasonScope                         // a required scope is missing
	ReasonUnavailable                   // keys or the auth pattern cannot be reached: fail closed
)

var reasonMessages = [...]string{
	ReasonMissing:     "missing bearer token",
	ReasonMalformed:   "malformed token",
	ReasonAlgorithm:   "token algorithm not allowed",
	ReasonUnknownKey:  "token signing key unknown",
	ReasonSignature:   "token signature is invalid",
	ReasonExpired:     "token expired",
	ReasonNotYetValid: "token not valid yet",
	ReasonIssuer:      "token issuer not accepted",
	ReasonAudience:    "token audience not accepted",
	ReasonClaims:      "token claims are invalid",
	ReasonRejected:    "token rejected",
	ReasonScope:       "insufficient scope",
	ReasonUnavailable: "authentication unavailable",
}

// String returns the reason's public message ("token expired").
func (r Reason) String() string {
	if int(r) < len(reasonMessages) && reasonMessages[r] != "" {
		return reasonMessages[r]
	}
	return "authentication failed"
}

// Error is the error every [Verifier] of this package and [RequireScopes]
// return. Its Message is short and public (safe to send to the client); it
// never holds the token. The cause, for logs, is reached with
// errors.Unwrap and is not public.
type Error struct {
	Reason  Reason
	Message string   // public message; the reason's when empty
	Scopes  []string // for ReasonScope: the scopes the route requires
	cause   error
}

// The sentinels, one per [Reason]: errors.Is(err, ErrExpired) holds for any
// [*Error] whose Reason is ReasonExpired.
var (
	ErrMissingToken      = &Error{Reason: ReasonMissing}
	ErrMalformed         = &Error{Reason: ReasonMalformed}
	ErrAlgorithm         = &Error{Reason: ReasonAlgorithm}
	ErrUnknownKey        = &Error{Reason: ReasonUnknownKey}
	ErrSignature         = &Error{Reason: ReasonSignature}
	ErrExpired           = &Error{Reason: ReasonExpired}
	ErrNotYetValid       = &Error{Reason: ReasonNotYetValid}
	ErrIssuer            = &Error{Reason: ReasonIssuer}
	ErrAudience          = &Error{Reason: ReasonAudience}
	ErrClaims            = &Error{Reason: ReasonClaims}
	ErrRejected          = &Error{Reason: ReasonRejected}
	ErrInsufficientScope = &Error{Reason: ReasonScope}
	ErrUnavailable       = &Error{Reason: ReasonUnavailable}
)

// newError returns an error of reason r with a public message (the
// reason's when empty) and a private cause.
func newError(r Reason, msg string, cause error) *Error {
	return &Error{Reason: r, Message: msg, cause: cause}
}

// Public returns the public message: Message, or the reason's.
func (e *Error) Public() string {
	if e.Message != "" {
		return e.Message
	}
	return e.Reason.String()
}

// Error returns the public message with the cause, for logs.
func (e *Error) Error() string {
	s := "wizard: gateway: auth: " + e.Public()
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

// Unwrap returns the cause, if any.
func (e *Error) Unwrap() error { return e.cause }

// Is reports whether target is an *Error with the same Reason, such as the
// sentinels.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t != nil && t.Reason == e.Reason
}

// Status returns the HTTP status the error maps to: 401 for a missing or
// invalid token, 403 for a missing scope, 503 when verification could not
// be done (fail closed).
func (e *Error) Status() int {
	switch e.Reason {
	case ReasonScope:
		return http.StatusForbidden
	case ReasonUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusUnauthorized
}

// Code returns the wizard error code matching [Error.Status]:
// unauthenticated, permission_denied or unavailable.
func (e *Error) Code() runtime.Code {
	switch e.Reason {
	case ReasonScope:
		return runtime.CodePermissionDenied
	case ReasonUnavailable:
		return runtime.CodeUnavailable
	}
	return runtime.CodeUnauthenticated
}

// WWWAuthenticate returns the value of the WWW-Authenticate header for the
// error's response (RFC 6750 §3), or "" for a 503, which has none:
//
//	Bearer                                           (no token: RFC 6750 §3.1 gives no error code)
//	Bearer error="invalid_token", error_description="token expired"
//	Bearer error="insufficient_scope", error_description="insufficient scope", scope="orders:write"
func (e *Error) WWWAuthenticate() string {
	switch e.Reason {
	case ReasonUnavailable:
		return ""
	case ReasonMissing:
		return "Bearer"
	case ReasonScope:
		s := `Bearer error="insufficient_scope", error_description="` + quotable(e.Public()) + `"`
		if len(e.Scopes) > 0 {
			s += `, scope="` + quotable(strings.Join(e.Scopes, " ")) + `"`
		}
		return s
	}
	return `Bearer error="invalid_token", error_description="` + quotable(e.Public()) + `"`
}

// quotable drops the characters RFC 6750 does not allow in its quoted
// attribute values (%x20-21 / %x23-5B / %x5D-7E).
func quotable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return -1
		}
		return r
	}, s)
}

// ErrorOf returns the [*Error] in err's chain, or, for any other non-nil
// error (a [Verifier] of another package), one of [ReasonUnavailable]
// wrapping it: an error nobody classified fails closed. It returns nil for
// nil.
func ErrorOf(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return newError(ReasonUnavailable, "", err)
}
