package gateway

import (
	"context"

	"github.com/wizardmesh/wizard/gateway/auth"
)

// verifier verifies a bearer token; its errors carry their 401 (with a
// WWW-Authenticate challenge) or 503 (verification unavailable: fail
// closed).
type verifier interface {
	verify(ctx context.Context, token string) (*auth.Identity, *apiError)
	// verifyOnce verifies a token whose identity the caller keeps (a
	// WebSocket connection's): a caching verifier does not cache it.
	verifyOnce(ctx context.Context, token string) (*auth.Identity, *apiError)
}
