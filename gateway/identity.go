package gateway

import (
	"context"
	"slices"
	"time"
)

// identity is who a verified token says the caller is.
type identity struct {
	subject string
	issuer  string
	scopes  []string
	expires time.Time // zero: no expiry
}

// verifier verifies a bearer token; its errors carry their 401 (with a
// WWW-Authenticate challenge) or 503 (delegated auth unavailable: fail
// closed).
type verifier interface {
	verify(ctx context.Context, token string) (*identity, *apiError)
}

// hasScopes reports whether id holds every scope of want.
func (id *identity) hasScopes(want []string) bool {
	for _, s := range want {
		if !slices.Contains(id.scopes, s) {
			return false
		}
	}
	return true
}
