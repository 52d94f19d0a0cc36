package auth

import (
	"context"
	"slices"
	"strings"
	"time"
)

// Identity is who a verified token says the caller is. Every field comes
// from verified claims (or the auth pattern's answer), never from the
// request. An Identity a [Verifier] returns may be shared between callers
// (the caches of both verifiers hand out the same one): treat it as
// read-only.
type Identity struct {
	Subject   string         // sub; may be empty if the issuer sets none
	Issuer    string         // iss
	Audience  []string       // aud
	Scopes    []string       // from scope (space-separated) and scp (array or string)
	ExpiresAt time.Time      // exp
	Claims    map[string]any // all verified claims (for a delegate: its answer's claims)
}

// Verifier verifies a bearer token. It returns the token's identity, or an
// [*Error] saying why not (its [Error.Status] is 401 or 503). Verify is
// safe for concurrent use.
type Verifier interface {
	Verify(ctx context.Context, token string) (*Identity, error)
}

// HasScope reports whether id holds scope s.
func (id *Identity) HasScope(s string) bool {
	return id != nil && slices.Contains(id.Scopes, s)
}

// RequireScopes returns nil if id holds every scope of scopes, an error of
// [ReasonScope] (403) naming the scopes required if not, and
// [ErrMissingToken] (401) if id is nil (a route with auth optional that
// still requires a scope).
func RequireScopes(id *Identity, scopes []string) error {
	if len(scopes) == 0 {
		return nil
	}
	if id == nil {
		return ErrMissingToken
	}
	for _, s := range scopes {
		if !id.HasScope(s) {
			return &Error{Reason: ReasonScope, Scopes: slices.Clone(scopes)}
		}
	}
	return nil
}

// scopesOf reads scopes from the claims scope (a space-separated string,
// RFC 8693) and scp (an array of strings, or a space-separated string as
// some issuers send it), in order and without repeats.
func scopesOf(claims map[string]any) []string {
	var out []string
	add := func(s string) {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, name := range [...]string{"scope", "scp"} {
		switch v := claims[name].(type) {
		case string:
			for s := range strings.FieldsSeq(v) {
				add(s)
			}
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok {
					add(s)
				}
			}
		case []string:
			for _, s := range v {
				add(s)
			}
		}
	}
	return out
}
